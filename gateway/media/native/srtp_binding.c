/*
 * SRTP and SRTCP (RFC 3711, RFC 7714) through libsrtp2: one crypto context per call and
 * direction, packets protected and unprotected in place. libsrtp keeps the rollover counter, the
 * replay window and the key derivation; this file only maps its calls to JavaScript.
 *
 * Built with libsrtp2 when pkg-config finds it (binding.gyp defines CALLGATE_HAVE_LIBSRTP);
 * without it the module loads and says `available: false`, so a gateway built without the
 * library still starts and refuses only SRTP calls.
 *
 * Exported (all synchronous):
 *   available                        whether libsrtp2 is linked
 *   version                          libsrtp's version string ('' when not available)
 *   crypto                           what runs the AES-CM, HMAC-SHA1 and AES-GCM primitives:
 *                                    'openssl' (srtp_openssl_crypto.c), 'libsrtp' (its own
 *                                    build's), or 'mixed' when only some passed their test
 *   TRAILER_BYTES                    room protect() needs after an RTP packet
 *   RTCP_TRAILER_BYTES               room protectRtcp() needs after an RTCP packet
 *   create(suite, key, outbound)     a context (an external): suite 0 AES_CM_128_HMAC_SHA1_80,
 *                                    1 AES_CM_128_HMAC_SHA1_32, 2 AEAD_AES_128_GCM; key is the
 *                                    master key then the master salt; throws on a bad suite,
 *                                    key length or a libsrtp failure (`code` is its status)
 *   protect(ctx, buf, len) -> n      encrypts the packet of `len` bytes at the start of buf and
 *                                    appends its tag (buf must have TRAILER_BYTES more room);
 *                                    the new length, or -status on failure
 *   unprotect(ctx, buf) -> n         checks and decrypts buf in place: the plain length, or
 *                                    -status (7 auth_fail, 9 replay_fail, 10 replay_old, ...)
 *   protectRtcp, unprotectRtcp       the same for SRTCP
 *   dispose(ctx)                     frees the context now (the garbage collector would later)
 */
#include <node_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef CALLGATE_HAVE_LIBSRTP
#include <srtp2/srtp.h>

#include "srtp_openssl_crypto.h"
#endif

#define SUITE_AES_CM_128_HMAC_SHA1_80 0
#define SUITE_AES_CM_128_HMAC_SHA1_32 1
#define SUITE_AEAD_AES_128_GCM 2

/* Replay window in packets (RFC 3711 section 3.3.2 asks for at least 64; libsrtp's default). */
#define REPLAY_WINDOW 128
/* Largest tag (GCM, 16 bytes) plus the SRTCP index (4 bytes); no MKI is ever used. */
#define TRAILER_BYTES 16
#define RTCP_TRAILER_BYTES 20

#define THROW_IF(cond, msg)                              \
  do {                                                   \
    if (cond) {                                          \
      napi_throw_error(env, "CALLGATE_SRTP_ARG", (msg)); \
      return NULL;                                       \
    }                                                    \
  } while (0)

static napi_value make_int(napi_env env, int64_t value) {
  napi_value out;
  napi_create_int64(env, value, &out);
  return out;
}

#ifdef CALLGATE_HAVE_LIBSRTP

typedef struct {
  srtp_t session;
} srtp_context;

static void context_finalize(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  srtp_context *ctx = data;
  if (ctx->session != NULL) srtp_dealloc(ctx->session);
  free(ctx);
}

static size_t key_bytes_of(int suite) {
  return suite == SUITE_AEAD_AES_128_GCM ? 28 : 30;
}

static napi_value srtp_binding_create(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  THROW_IF(argc < 3, "create(suite, key, outbound)");
  int32_t suite = -1;
  napi_get_value_int32(env, argv[0], &suite);
  THROW_IF(suite < SUITE_AES_CM_128_HMAC_SHA1_80 || suite > SUITE_AEAD_AES_128_GCM, "unknown suite");
  bool is_buffer = false;
  napi_is_buffer(env, argv[1], &is_buffer);
  THROW_IF(!is_buffer, "key must be a Buffer");
  void *key = NULL;
  size_t key_length = 0;
  napi_get_buffer_info(env, argv[1], &key, &key_length);
  THROW_IF(key_length != key_bytes_of(suite), "wrong master key and salt length for the suite");
  bool outbound = false;
  napi_get_value_bool(env, argv[2], &outbound);

  srtp_policy_t policy;
  memset(&policy, 0, sizeof(policy));
  switch (suite) {
    case SUITE_AES_CM_128_HMAC_SHA1_80:
      srtp_crypto_policy_set_aes_cm_128_hmac_sha1_80(&policy.rtp);
      srtp_crypto_policy_set_aes_cm_128_hmac_sha1_80(&policy.rtcp);
      break;
    case SUITE_AES_CM_128_HMAC_SHA1_32:
      /* RFC 4568 section 6.2.1: SRTCP keeps the 80-bit tag with this suite. */
      srtp_crypto_policy_set_aes_cm_128_hmac_sha1_32(&policy.rtp);
      srtp_crypto_policy_set_aes_cm_128_hmac_sha1_80(&policy.rtcp);
      break;
    default:
      srtp_crypto_policy_set_aes_gcm_128_16_auth(&policy.rtp);
      srtp_crypto_policy_set_aes_gcm_128_16_auth(&policy.rtcp);
      break;
  }
  /* libsrtp copies the key material into the session it derives the keys for. */
  unsigned char material[32];
  memcpy(material, key, key_length);
  policy.key = material;
  policy.ssrc.type = outbound ? ssrc_any_outbound : ssrc_any_inbound;
  policy.window_size = REPLAY_WINDOW;
  policy.allow_repeat_tx = 0;
  policy.next = NULL;

  srtp_context *ctx = calloc(1, sizeof(*ctx));
  THROW_IF(ctx == NULL, "out of memory");
  srtp_err_status_t status = srtp_create(&ctx->session, &policy);
  memset(material, 0, sizeof(material));
  if (status != srtp_err_status_ok) {
    free(ctx);
    char code[16];
    snprintf(code, sizeof(code), "%d", (int)status);
    napi_throw_error(env, code, "libsrtp could not create the crypto context");
    return NULL;
  }
  napi_value external;
  if (napi_create_external(env, ctx, context_finalize, NULL, &external) != napi_ok) {
    srtp_dealloc(ctx->session);
    free(ctx);
    napi_throw_error(env, NULL, "could not wrap the crypto context");
    return NULL;
  }
  return external;
}

/* The context and packet buffer of a (ctx, buf[, len]) call; NULL after throwing. */
static srtp_context *packet_args(napi_env env, napi_callback_info info, size_t want,
                                 unsigned char **data, size_t *capacity, int64_t *length) {
  size_t argc = 3;
  napi_value argv[3];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < want) {
    napi_throw_error(env, "CALLGATE_SRTP_ARG", "missing arguments");
    return NULL;
  }
  srtp_context *ctx = NULL;
  if (napi_get_value_external(env, argv[0], (void **)&ctx) != napi_ok || ctx == NULL ||
      ctx->session == NULL) {
    napi_throw_error(env, "CALLGATE_SRTP_ARG", "not a live SRTP context");
    return NULL;
  }
  void *bytes = NULL;
  if (napi_get_buffer_info(env, argv[1], &bytes, capacity) != napi_ok) {
    napi_throw_error(env, "CALLGATE_SRTP_ARG", "not a Buffer");
    return NULL;
  }
  *data = bytes;
  *length = (int64_t)*capacity;
  if (want == 3) napi_get_value_int64(env, argv[2], length);
  return ctx;
}

static napi_value protect_with(napi_env env, napi_callback_info info, int rtcp) {
  unsigned char *data;
  size_t capacity;
  int64_t length;
  srtp_context *ctx = packet_args(env, info, 3, &data, &capacity, &length);
  if (ctx == NULL) return NULL;
  size_t room = rtcp ? RTCP_TRAILER_BYTES : TRAILER_BYTES;
  THROW_IF(length < 0 || (size_t)length + room > capacity, "no room for the SRTP trailer");
  int len = (int)length;
  srtp_err_status_t status =
      rtcp ? srtp_protect_rtcp(ctx->session, data, &len) : srtp_protect(ctx->session, data, &len);
  return make_int(env, status == srtp_err_status_ok ? len : -(int64_t)status);
}

static napi_value unprotect_with(napi_env env, napi_callback_info info, int rtcp) {
  unsigned char *data;
  size_t capacity;
  int64_t length;
  srtp_context *ctx = packet_args(env, info, 2, &data, &capacity, &length);
  if (ctx == NULL) return NULL;
  int len = (int)capacity;
  srtp_err_status_t status = rtcp ? srtp_unprotect_rtcp(ctx->session, data, &len)
                                  : srtp_unprotect(ctx->session, data, &len);
  return make_int(env, status == srtp_err_status_ok ? len : -(int64_t)status);
}

static napi_value srtp_binding_protect(napi_env env, napi_callback_info info) {
  return protect_with(env, info, 0);
}
static napi_value srtp_binding_unprotect(napi_env env, napi_callback_info info) {
  return unprotect_with(env, info, 0);
}
static napi_value srtp_binding_protect_rtcp(napi_env env, napi_callback_info info) {
  return protect_with(env, info, 1);
}
static napi_value srtp_binding_unprotect_rtcp(napi_env env, napi_callback_info info) {
  return unprotect_with(env, info, 1);
}

static napi_value srtp_binding_dispose(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  srtp_context *ctx = NULL;
  if (argc >= 1 && napi_get_value_external(env, argv[0], (void **)&ctx) == napi_ok && ctx != NULL &&
      ctx->session != NULL) {
    srtp_dealloc(ctx->session);
    ctx->session = NULL;
  }
  return NULL;
}

#endif /* CALLGATE_HAVE_LIBSRTP */

static void export_value(napi_env env, napi_value exports, const char *name, napi_value value) {
  napi_set_named_property(env, exports, name, value);
}

#ifdef CALLGATE_HAVE_LIBSRTP
static void export_function(napi_env env, napi_value exports, const char *name, napi_callback cb) {
  napi_value fn;
  napi_create_function(env, name, NAPI_AUTO_LENGTH, cb, NULL, &fn);
  export_value(env, exports, name, fn);
}
#endif

NAPI_MODULE_INIT(/* napi_env env, napi_value exports */) {
  napi_value flag;
  napi_value version;
#ifdef CALLGATE_HAVE_LIBSRTP
  /* srtp_init is idempotent in libsrtp2 (it only registers the built-in ciphers once). */
  int ok = srtp_init() == srtp_err_status_ok;
  napi_get_boolean(env, ok, &flag);
  int swapped = ok ? callgate_srtp_use_openssl() : 0;
  const char *crypto = swapped == CALLGATE_SRTP_OPENSSL_ALL
                           ? "openssl"
                           : swapped == 0 ? "libsrtp" : "mixed";
  napi_value crypto_name;
  napi_create_string_utf8(env, crypto, NAPI_AUTO_LENGTH, &crypto_name);
  export_value(env, exports, "crypto", crypto_name);
  napi_create_string_utf8(env, srtp_get_version_string(), NAPI_AUTO_LENGTH, &version);
  if (ok) {
    export_function(env, exports, "create", srtp_binding_create);
    export_function(env, exports, "protect", srtp_binding_protect);
    export_function(env, exports, "unprotect", srtp_binding_unprotect);
    export_function(env, exports, "protectRtcp", srtp_binding_protect_rtcp);
    export_function(env, exports, "unprotectRtcp", srtp_binding_unprotect_rtcp);
    export_function(env, exports, "dispose", srtp_binding_dispose);
  }
#else
  napi_get_boolean(env, false, &flag);
  napi_create_string_utf8(env, "", 0, &version);
#endif
  export_value(env, exports, "available", flag);
  export_value(env, exports, "version", version);
  export_value(env, exports, "TRAILER_BYTES", make_int(env, TRAILER_BYTES));
  export_value(env, exports, "RTCP_TRAILER_BYTES", make_int(env, RTCP_TRAILER_BYTES));
  return exports;
}
