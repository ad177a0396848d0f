/*
 * G.722 (ITU-T G.722, 64 kbit/s, 16 kHz audio) through spandsp's bit-exact codec, the one
 * baresip's g722 module uses too. One encoder or decoder per call direction: both are adaptive
 * (sub-band ADPCM), so a stream's state must never be shared with another stream.
 *
 * Built from its own file into its own module (g722_codec.node), so that a machine without
 * libspandsp-dev still builds the RTP sockets: binding.gyp defines HAVE_SPANDSP (and links
 * -lspandsp) only when the header is there; without it this file compiles to a module that exports
 * only `available: false` and `reason`.
 *
 * Exported (all synchronous; a wrong argument throws a TypeError):
 *   available                         true when built against spandsp
 *   createEncoder() -> handle         an encoder at 64 kbit/s from 16 kHz PCM
 *   encode(handle, pcm) -> Buffer     pcm: a Buffer of 16-bit little-endian samples (an even
 *                                     count); one byte out per two samples in
 *   createDecoder() -> handle         a decoder at 64 kbit/s to 16 kHz PCM
 *   decode(handle, data) -> Buffer    two 16-bit little-endian samples out per byte in
 * Handles are freed by the garbage collector.
 */
#include <node_api.h>
#include <stdint.h>
#include <string.h>

#ifdef HAVE_SPANDSP
#include <spandsp/telephony.h>
#include <spandsp/g722.h>

#define G722_BIT_RATE 64000

static napi_value throw_type(napi_env env, const char *usage) {
  napi_throw_type_error(env, NULL, usage);
  return NULL;
}

static void free_encoder(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  g722_encode_free((g722_encode_state_t *)data);
}

static void free_decoder(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  g722_decode_free((g722_decode_state_t *)data);
}

static napi_value js_create_encoder(napi_env env, napi_callback_info info) {
  (void)info;
  g722_encode_state_t *state = g722_encode_init(NULL, G722_BIT_RATE, 0);
  if (state == NULL) {
    napi_throw_error(env, "ENOMEM", "G.722 encoder: out of memory");
    return NULL;
  }
  napi_value handle;
  if (napi_create_external(env, state, free_encoder, NULL, &handle) != napi_ok) {
    g722_encode_free(state);
    return NULL;
  }
  return handle;
}

static napi_value js_create_decoder(napi_env env, napi_callback_info info) {
  (void)info;
  g722_decode_state_t *state = g722_decode_init(NULL, G722_BIT_RATE, 0);
  if (state == NULL) {
    napi_throw_error(env, "ENOMEM", "G.722 decoder: out of memory");
    return NULL;
  }
  napi_value handle;
  if (napi_create_external(env, state, free_decoder, NULL, &handle) != napi_ok) {
    g722_decode_free(state);
    return NULL;
  }
  return handle;
}

/* The state behind argv[0] and the bytes of the Buffer argv[1], or 0 when either is wrong. */
static int read_arguments(napi_env env, napi_callback_info info, void **state, uint8_t **data,
                          size_t *length) {
  size_t argc = 2;
  napi_value argv[2];
  napi_valuetype type;
  bool is_buffer = false;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 2) return 0;
  if (napi_typeof(env, argv[0], &type) != napi_ok || type != napi_external) return 0;
  if (napi_is_buffer(env, argv[1], &is_buffer) != napi_ok || !is_buffer) return 0;
  if (napi_get_value_external(env, argv[0], state) != napi_ok) return 0;
  return napi_get_buffer_info(env, argv[1], (void **)data, length) == napi_ok;
}

static napi_value js_encode(napi_env env, napi_callback_info info) {
  void *state;
  uint8_t *pcm;
  size_t length;
  if (!read_arguments(env, info, &state, &pcm, &length) || length % 4 != 0)
    return throw_type(env, "encode(encoder, pcm: Buffer of an even number of int16 samples)");
  int samples = (int)(length / 2);
  napi_value result;
  void *out;
  if (napi_create_buffer(env, (size_t)samples / 2, &out, &result) != napi_ok) return NULL;
  /* The Buffer may sit at an odd offset in its ArrayBuffer: copy into aligned samples. */
  int16_t aligned[960];
  int done = 0;
  while (done < samples) {
    int chunk = samples - done > 960 ? 960 : samples - done;
    memcpy(aligned, pcm + 2 * (size_t)done, 2 * (size_t)chunk);
    g722_encode((g722_encode_state_t *)state, (uint8_t *)out + done / 2, aligned, chunk);
    done += chunk;
  }
  return result;
}

static napi_value js_decode(napi_env env, napi_callback_info info) {
  void *state;
  uint8_t *data;
  size_t length;
  if (!read_arguments(env, info, &state, &data, &length))
    return throw_type(env, "decode(decoder, data: Buffer)");
  napi_value result;
  void *out;
  if (napi_create_buffer(env, length * 4, &out, &result) != napi_ok) return NULL;
  int16_t aligned[960];
  size_t done = 0;
  while (done < length) {
    size_t chunk = length - done > 480 ? 480 : length - done;
    int samples = g722_decode((g722_decode_state_t *)state, aligned, data + done, (int)chunk);
    memcpy((uint8_t *)out + 4 * done, aligned, 2 * (size_t)samples);
    done += chunk;
  }
  return result;
}

static void export_function(napi_env env, napi_value exports, const char *name, napi_callback fn) {
  napi_value value;
  napi_create_function(env, name, NAPI_AUTO_LENGTH, fn, NULL, &value);
  napi_set_named_property(env, exports, name, value);
}
#endif

NAPI_MODULE_INIT(/* napi_env env, napi_value exports */) {
  napi_value available;
#ifdef HAVE_SPANDSP
  napi_get_boolean(env, true, &available);
  export_function(env, exports, "createEncoder", js_create_encoder);
  export_function(env, exports, "encode", js_encode);
  export_function(env, exports, "createDecoder", js_create_decoder);
  export_function(env, exports, "decode", js_decode);
#else
  napi_value reason;
  napi_get_boolean(env, false, &available);
  napi_create_string_utf8(env, "built without spandsp (libspandsp-dev)", NAPI_AUTO_LENGTH, &reason);
  napi_set_named_property(env, exports, "reason", reason);
#endif
  napi_set_named_property(env, exports, "available", available);
  return exports;
}
