//! A program's own HTTP server with gpuscope's families on its `/metrics`, beside a metric of
//! its own: a hyper server over a prometheus-client registry holding a `GpuCollector`.
//!
//! It serves a recorded machine (the 8-GPU fixture, or the fixture file given as the first
//! argument) on 127.0.0.1 at a free port, scrapes itself once, prints the first lines of the
//! answer and exits; with `--forever` it prints its address and serves until killed.
//!
//! ```text
//! cargo run -p gpu-export --example serve [-- FIXTURE.json] [--forever]
//! ```

use std::convert::Infallible;
use std::io::{Read as _, Write as _};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;

use gpu_export::{GpuCollector, Options};
use gpu_processes::ProcessCollector;

const DEFAULT_FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../fixtures/h100-sxm-8gpu.json"
);

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let forever = args.iter().any(|a| a == "--forever");
    let fixture = args
        .iter()
        .find(|a| !a.starts_with("--"))
        .map_or(DEFAULT_FIXTURE, String::as_str);

    // The GPUs: a replay of the recording at its first frame.
    let collector = ProcessCollector::from_fixture(fixture, Some(0))?;
    collector.context().set_query_plan(gpu_export::query_plan());
    let options = Options {
        processes: true,
        ..Options::of(&collector)
    };

    // The program's registry: a metric of its own, and the GPUs' families.
    let scrapes = Counter::<u64>::default();
    let mut registry = Registry::default();
    registry.register(
        "example_scrapes",
        "Scrapes of /metrics served",
        scrapes.clone(),
    );
    GpuCollector::new(collector, options).register(&mut registry);
    let registry = Arc::new(Mutex::new(registry));

    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    listener.set_nonblocking(true)?;
    let address = listener.local_addr()?;
    std::thread::spawn(move || serve(listener, registry, scrapes));

    if forever {
        println!("serving http://{address}/metrics");
        loop {
            std::thread::park();
        }
    }
    let answer = scrape(address)?;
    let (head, body) = answer.split_once("\r\n\r\n").ok_or("no HTTP head")?;
    let status = head.lines().next().unwrap_or("");
    if !status.contains(" 200 ") {
        return Err(format!("GET /metrics answered {status}").into());
    }
    let mut out = format!(
        "GET http://{address}/metrics: {status}, {} lines\n",
        body.lines().count()
    );
    for line in body.lines().take(12) {
        out.push_str(line);
        out.push('\n');
    }
    // A reader that stops early (`| head -3`) is not an error.
    match std::io::stdout().lock().write_all(out.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

/// Serves `/metrics` from `registry` on a current-thread runtime, for ever.
fn serve(listener: std::net::TcpListener, registry: Arc<Mutex<Registry>>, scrapes: Counter) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener).expect("the listener");
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let registry = registry.clone();
            let scrapes = scrapes.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req: Request<_>| {
                    let answer = metrics(&req, &registry, &scrapes);
                    async move { Ok::<_, Infallible>(answer) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
}

/// The answer to one request: the registry's OpenMetrics text on `/metrics`, 404 elsewhere.
fn metrics<B>(
    req: &Request<B>,
    registry: &Mutex<Registry>,
    scrapes: &Counter,
) -> Response<Full<Bytes>> {
    let mut answer = Response::new(Full::new(Bytes::new()));
    if req.uri().path() != "/metrics" {
        *answer.status_mut() = StatusCode::NOT_FOUND;
        return answer;
    }
    scrapes.inc();
    let mut text = String::new();
    let encoded = prometheus_client::encoding::text::encode(
        &mut text,
        &registry.lock().unwrap_or_else(|p| p.into_inner()),
    );
    if encoded.is_err() {
        *answer.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
        return answer;
    }
    answer.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(gpu_export::OPENMETRICS_CONTENT_TYPE),
    );
    *answer.body_mut() = Full::new(Bytes::from(text));
    answer
}

/// `GET /metrics` over a plain socket: the whole answer, head and body.
fn scrape(address: std::net::SocketAddr) -> std::io::Result<String> {
    let mut stream = std::net::TcpStream::connect(address)?;
    stream.set_read_timeout(Some(std::time::Duration::from_secs(30)))?;
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    Ok(answer)
}
