#!/usr/bin/env python3
"""GPU load without PyTorch: a PTX busy loop launched through libcuda (the driver JITs it).
Usage: spin.py SECONDS [HOLD_GIB]. Prints 'load running' once the first kernel ran."""
import ctypes, sys, time

PTX = rb"""
.version 7.0
.target sm_70
.address_size 64
.visible .entry spin(.param .u64 out, .param .u32 iters)
{
  .reg .f32 %f<4>;
  .reg .b32 %r<4>;
  .reg .pred %p;
  .reg .b64 %rd<3>;
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r1, [iters];
  mov.f32 %f1, 0f3F800000;
  mov.f32 %f2, 0f3F7FFFFE;
  mov.u32 %r2, 0;
LOOP:
  fma.rn.f32 %f1, %f1, %f2, %f2;
  add.u32 %r2, %r2, 1;
  setp.lt.u32 %p, %r2, %r1;
  @%p bra LOOP;
  cvta.to.global.u64 %rd2, %rd1;
  st.global.f32 [%rd2], %f1;
  ret;
}
"""

def check(rc, what):
    if rc != 0:
        raise SystemExit(f"spin.py: {what} failed: CUDA error {rc}")

def main():
    seconds = float(sys.argv[1])
    hold = float(sys.argv[2]) if len(sys.argv) > 2 else 0
    cu = ctypes.CDLL("libcuda.so.1")
    check(cu.cuInit(0), "cuInit")
    dev = ctypes.c_int()
    check(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    ctx = ctypes.c_void_p()
    check(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
    check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    mod = ctypes.c_void_p()
    check(cu.cuModuleLoadData(ctypes.byref(mod), ctypes.c_char_p(PTX)), "cuModuleLoadData")
    fn = ctypes.c_void_p()
    check(cu.cuModuleGetFunction(ctypes.byref(fn), mod, b"spin"), "cuModuleGetFunction")
    out = ctypes.c_uint64()
    check(cu.cuMemAlloc_v2(ctypes.byref(out), ctypes.c_size_t(4)), "cuMemAlloc")
    if hold > 0:
        big = ctypes.c_uint64()
        check(cu.cuMemAlloc_v2(ctypes.byref(big), ctypes.c_size_t(int(hold * (1 << 30)))), "cuMemAlloc hold")
    iters = ctypes.c_uint32(200000)
    args = (ctypes.c_void_p * 2)(ctypes.cast(ctypes.byref(out), ctypes.c_void_p),
                                 ctypes.cast(ctypes.byref(iters), ctypes.c_void_p))
    end = time.time() + seconds
    first = True
    while time.time() < end:
        check(cu.cuLaunchKernel(fn, 2048, 1, 1, 256, 1, 1, 0, None, args, None), "cuLaunchKernel")
        check(cu.cuCtxSynchronize(), "cuCtxSynchronize")
        if first:
            print("load running", flush=True)
            first = False

if __name__ == "__main__":
    main()
