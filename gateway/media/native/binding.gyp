{
  "targets": [
    {
      "target_name": "rtp_udp",
      "sources": ["rtp_udp.c"],
      "cflags": ["-O2", "-Wall", "-Wextra"],
      "defines": ["NAPI_VERSION=8"]
    },
    {
      "target_name": "srtp_binding",
      "sources": ["srtp_binding.c", "srtp_openssl_crypto.c"],
      "cflags": ["-O2", "-Wall", "-Wextra"],
      "defines": ["NAPI_VERSION=8"],
      "conditions": [["'<!(pkg-config --exists libsrtp2 && echo 1 || echo 0)'=='1'", {"defines": ["CALLGATE_HAVE_LIBSRTP"], "libraries": ["<!@(pkg-config --libs libsrtp2)", "<!@(pkg-config --exists libcrypto && pkg-config --libs libcrypto || true)"]}]]
    },
    {
      "target_name": "g722_codec",
      "sources": ["g722_codec.c"],
      "cflags": ["-O2", "-Wall", "-Wextra"],
      "defines": ["NAPI_VERSION=8", "<!@(test -e /usr/include/spandsp/g722.h && echo HAVE_SPANDSP || true)"],
      "libraries": ["<!@(test -e /usr/include/spandsp/g722.h && echo -lspandsp || true)"]
    }
  ]
}
