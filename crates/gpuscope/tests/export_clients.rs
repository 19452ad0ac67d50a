//! `gpuscope export` under misbehaving clients: a client that connects and sends nothing, one
//! that sends garbage, and one that sends half a request do not stop other scrapes.

mod export_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use export_support::{get, parse, parse_response, Exporter};

fn connect(addr: &str) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connects");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

#[test]
fn silent_garbage_and_half_clients_do_not_block_scrapes() {
    let exp = Exporter::start(&["--demo", "--frame", "1", "--processes"]);
    // Many clients that connect and say nothing, and some that stop mid-request.
    let silent: Vec<TcpStream> = (0..40).map(|_| connect(&exp.addr)).collect();
    let mut half: Vec<TcpStream> = (0..10).map(|_| connect(&exp.addr)).collect();
    for s in &mut half {
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            .unwrap();
    }
    // Garbage is answered 400 and closed.
    for garbage in [
        &b"\x00\x01\x02garbage\r\n\r\n"[..],
        b"NOT HTTP AT ALL\r\n\r\n",
        b"GET /metrics SPDY/9\r\n\r\n",
    ] {
        let mut g = connect(&exp.addr);
        g.write_all(garbage).unwrap();
        let mut raw = Vec::new();
        g.read_to_end(&mut raw)
            .expect("the garbage client gets an answer");
        assert_eq!(parse_response(&raw).status, 400, "{garbage:?}");
    }
    // An endless header line is cut off.
    let mut big = connect(&exp.addr);
    let line = vec![b'a'; 32 * 1024];
    let _ = big.write_all(b"GET /metrics HTTP/1.1\r\nX: ");
    let _ = big.write_all(&line);
    let mut raw = Vec::new();
    let _ = big.read_to_end(&mut raw);
    assert_eq!(parse_response(&raw).status, 431);

    // Meanwhile, concurrent scrapes all answer in full.
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let addr = exp.addr.clone();
            std::thread::spawn(move || {
                let r = get(&addr, "/metrics", None);
                assert_eq!(r.status, 200);
                parse(&r.body)
                    .find("gpuscope_device_up", &[])
                    .iter()
                    .filter(|s| s.value == 1.0)
                    .count()
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().expect("a scrape thread"), 8);
    }
    drop(silent);
    drop(half);
}

#[test]
fn a_kept_alive_connection_serves_several_scrapes_and_head() {
    let exp = Exporter::start(&["--demo", "--frame", "1"]);
    let mut s = connect(&exp.addr);
    let mut lengths = Vec::new();
    for _ in 0..3 {
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        lengths.push(read_one(&mut s));
    }
    assert!(lengths.iter().all(|&n| n > 1000), "{lengths:?}");
    s.write_all(b"HEAD /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).unwrap();
    let text = String::from_utf8(rest).unwrap();
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    assert!(text.ends_with("\r\n\r\n"), "HEAD has no body: {text}");

    let mut post = connect(&exp.addr);
    post.write_all(b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n")
        .unwrap();
    let mut raw = Vec::new();
    post.read_to_end(&mut raw).unwrap();
    assert_eq!(parse_response(&raw).status, 405);
}

/// Reads one answer with a Content-Length from a kept-alive connection; its body length.
fn read_one(s: &mut TcpStream) -> usize {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut byte).expect("an answer head");
        head.push(byte[0]);
    }
    let head = String::from_utf8(head).unwrap();
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    assert!(head.contains("Connection: keep-alive"), "{head}");
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .expect("Content-Length")
        .parse()
        .unwrap();
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).unwrap();
    len
}
