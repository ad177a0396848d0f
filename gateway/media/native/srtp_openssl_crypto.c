/*
 * libsrtp's AES counter mode, HMAC-SHA1 and AES-GCM on OpenSSL's primitives (those of the OpenSSL
 * Node.js carries and exports to addons, else of the system's libcrypto, which binding.gyp links
 * when pkg-config finds it): Debian's libsrtp2 does its crypto through NSS, which sets up a new
 * PKCS#11 context for every packet at a cost that grows with the number of live keys (3.6 us a
 * packet with one call's keys, about 30 us with 300 calls' and 200 us with 1,000 calls', measured
 * in bench/RESULTS.md). libsrtp keeps the protocol (key derivation, rollover counter, replay
 * window, packet layout, the AEAD IV); only the primitives of the three suites are swapped through
 * its public srtp_replace_cipher_type and srtp_replace_auth_type, which first run each type's
 * known-answer test below (RFC 3711 B.2, RFC 2202 test 1, the GCM specification's test case 4)
 * and refuse it if it fails.
 *
 * Counter mode as libsrtp defines it for SRTP (RFC 3711 section 4.1.1): the key is the 16-byte AES
 * key followed by the 14-byte salt; each packet's IV is XORed with the salt (padded with two zero
 * bytes) to give the first counter block, and the keystream runs on from there across calls.
 * HMAC-SHA1 (RFC 2104) keeps the inner and outer hash states of its key, so a packet costs two
 * state copies and three hash updates.
 */
#ifdef CALLGATE_HAVE_LIBSRTP
#define OPENSSL_SUPPRESS_DEPRECATED /* SHA1_Init and friends: the cheapest state copy there is */
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <srtp2/auth.h>
#include <srtp2/cipher.h>
#include <srtp2/srtp.h>
#include <stdlib.h>
#include <string.h>

#include "srtp_openssl_crypto.h"

#define AES_128_KEY_BYTES 16
#define SALT_BYTES 14
#define ICM_KEY_BYTES (AES_128_KEY_BYTES + SALT_BYTES)
#define BLOCK_BYTES 16
#define SHA1_BYTES 20
#define SHA1_BLOCK_BYTES 64

/* ---- the two ciphers' state: an OpenSSL cipher context ------------------------------------- */

typedef struct {
  EVP_CIPHER_CTX *evp;
  uint8_t salt[BLOCK_BYTES]; /* counter mode: the 14-byte salt, then two zero bytes */
  int tag_len;               /* GCM */
  int encrypting;            /* GCM: the direction of the last IV */
} evp_state;

/* A cipher of `type` with its own OpenSSL context, as libsrtp's alloc functions hand it back. */
static srtp_err_status_t evp_cipher_alloc(srtp_cipher_pointer_t *cp,
                                          const srtp_cipher_type_t *type, int algorithm,
                                          int key_len, int tag_len) {
  srtp_cipher_t *cipher = calloc(1, sizeof(*cipher));
  evp_state *s = calloc(1, sizeof(*s));
  EVP_CIPHER_CTX *evp = EVP_CIPHER_CTX_new();
  if (cipher == NULL || s == NULL || evp == NULL) {
    free(cipher);
    free(s);
    EVP_CIPHER_CTX_free(evp);
    return srtp_err_status_alloc_fail;
  }
  s->evp = evp;
  s->tag_len = tag_len;
  cipher->type = type;
  cipher->state = s;
  cipher->key_len = key_len;
  cipher->algorithm = algorithm;
  *cp = cipher;
  return srtp_err_status_ok;
}

/* Frees the cipher and its context, the key schedule wiped first. */
static srtp_err_status_t evp_cipher_dealloc(srtp_cipher_pointer_t cp) {
  evp_state *s = cp->state;
  if (s != NULL) {
    EVP_CIPHER_CTX_free(s->evp);
    memset(s, 0, sizeof(*s));
    free(s);
  }
  memset(cp, 0, sizeof(*cp));
  free(cp);
  return srtp_err_status_ok;
}

/* ---- AES-128 counter mode ------------------------------------------------------------------ */

static srtp_err_status_t icm_alloc(srtp_cipher_pointer_t *cp, int key_len, int tag_len);

static srtp_err_status_t icm_init(void *state, const uint8_t *key) {
  evp_state *s = state;
  memset(s->salt, 0, sizeof(s->salt));
  memcpy(s->salt, key + AES_128_KEY_BYTES, SALT_BYTES);
  if (EVP_EncryptInit_ex(s->evp, EVP_aes_128_ctr(), NULL, key, NULL) != 1)
    return srtp_err_status_init_fail;
  return srtp_err_status_ok;
}

static srtp_err_status_t icm_set_iv(void *state, uint8_t *iv, srtp_cipher_direction_t direction) {
  (void)direction; /* counter mode is its own inverse */
  evp_state *s = state;
  uint8_t counter[BLOCK_BYTES];
  for (int i = 0; i < BLOCK_BYTES; i++) counter[i] = s->salt[i] ^ iv[i];
  if (EVP_EncryptInit_ex(s->evp, NULL, NULL, NULL, counter) != 1) return srtp_err_status_fail;
  return srtp_err_status_ok;
}

static srtp_err_status_t icm_apply(void *state, uint8_t *buffer, unsigned int *octets) {
  evp_state *s = state;
  int out = 0;
  if (EVP_EncryptUpdate(s->evp, buffer, &out, buffer, (int)*octets) != 1 ||
      out != (int)*octets)
    return srtp_err_status_cipher_fail;
  return srtp_err_status_ok;
}

/* RFC 3711 appendix B.2: the first two keystream blocks of that key and salt at index 0. */
static const uint8_t icm_test_key[ICM_KEY_BYTES] = {
    0x2b, 0x7e, 0x15, 0x16, 0x28, 0xae, 0xd2, 0xa6, 0xab, 0xf7, 0x15, 0x88, 0x09, 0xcf, 0x4f, 0x3c,
    0xf0, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8, 0xf9, 0xfa, 0xfb, 0xfc, 0xfd};
static uint8_t icm_test_iv[BLOCK_BYTES] = {0};
static const uint8_t icm_test_plaintext[32] = {0};
static const uint8_t icm_test_ciphertext[32] = {
    0xe0, 0x3e, 0xad, 0x09, 0x35, 0xc9, 0x5e, 0x80, 0xe1, 0x66, 0xb1, 0x6d, 0xd9, 0x2b, 0x4e, 0xb4,
    0xd2, 0x35, 0x13, 0x16, 0x2b, 0x02, 0xd0, 0xf7, 0x2a, 0x43, 0xa2, 0xfe, 0x4a, 0x5f, 0x97, 0xab};
static const srtp_cipher_test_case_t icm_test = {
    ICM_KEY_BYTES, icm_test_key, icm_test_iv, 32, icm_test_plaintext, 32, icm_test_ciphertext,
    0,             NULL,         0,           NULL};

static const srtp_cipher_type_t icm_type = {
    icm_alloc,  evp_cipher_dealloc, icm_init, NULL, icm_apply, icm_apply, icm_set_iv, NULL,
    "AES-128 counter mode (OpenSSL)", &icm_test, SRTP_AES_ICM_128};

static srtp_err_status_t icm_alloc(srtp_cipher_pointer_t *cp, int key_len, int tag_len) {
  (void)tag_len;
  if (key_len != ICM_KEY_BYTES) return srtp_err_status_bad_param; /* only AES-128 is offered */
  return evp_cipher_alloc(cp, &icm_type, SRTP_AES_ICM_128, key_len, 0);
}

/* ---- HMAC-SHA1 ----------------------------------------------------------------------------- */

typedef struct {
  SHA_CTX inner_start; /* the hash after the key XOR ipad */
  SHA_CTX outer_start; /* the hash after the key XOR opad */
  SHA_CTX running;
} hmac_state;

static srtp_err_status_t hmac_alloc(srtp_auth_pointer_t *ap, int key_len, int out_len);
static srtp_err_status_t hmac_dealloc(srtp_auth_pointer_t ap);

static srtp_err_status_t hmac_init(void *state, const uint8_t *key, int key_len) {
  hmac_state *s = state;
  if (key_len < 0 || key_len > SHA1_BYTES) return srtp_err_status_bad_param;
  uint8_t pad[SHA1_BLOCK_BYTES];
  memset(pad, 0x36, sizeof(pad));
  for (int i = 0; i < key_len; i++) pad[i] ^= key[i];
  SHA1_Init(&s->inner_start);
  SHA1_Update(&s->inner_start, pad, sizeof(pad));
  memset(pad, 0x5c, sizeof(pad));
  for (int i = 0; i < key_len; i++) pad[i] ^= key[i];
  SHA1_Init(&s->outer_start);
  SHA1_Update(&s->outer_start, pad, sizeof(pad));
  memset(pad, 0, sizeof(pad));
  s->running = s->inner_start;
  return srtp_err_status_ok;
}

static srtp_err_status_t hmac_start(void *state) {
  hmac_state *s = state;
  s->running = s->inner_start;
  return srtp_err_status_ok;
}

static srtp_err_status_t hmac_update(void *state, const uint8_t *buffer, int octets) {
  hmac_state *s = state;
  if (octets < 0) return srtp_err_status_bad_param;
  SHA1_Update(&s->running, buffer, (size_t)octets);
  return srtp_err_status_ok;
}

static srtp_err_status_t hmac_compute(void *state, const uint8_t *buffer, int octets, int tag_len,
                                      uint8_t *tag) {
  hmac_state *s = state;
  if (octets < 0 || tag_len < 0 || tag_len > SHA1_BYTES) return srtp_err_status_bad_param;
  uint8_t inner[SHA1_BYTES];
  uint8_t outer[SHA1_BYTES];
  SHA1_Update(&s->running, buffer, (size_t)octets);
  SHA1_Final(inner, &s->running);
  SHA_CTX finish = s->outer_start;
  SHA1_Update(&finish, inner, sizeof(inner));
  SHA1_Final(outer, &finish);
  memcpy(tag, outer, (size_t)tag_len);
  return srtp_err_status_ok;
}

/* RFC 2202 test case 1. */
static const uint8_t hmac_test_key[SHA1_BYTES] = {0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b,
                                                  0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b,
                                                  0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b};
static const uint8_t hmac_test_data[8] = {'H', 'i', ' ', 'T', 'h', 'e', 'r', 'e'};
static const uint8_t hmac_test_tag[SHA1_BYTES] = {0xb6, 0x17, 0x31, 0x86, 0x55, 0x05, 0x72,
                                                  0x64, 0xe2, 0x8b, 0xc0, 0xb6, 0xfb, 0x37,
                                                  0x8c, 0x8e, 0xf1, 0x46, 0xbe, 0x00};
static const srtp_auth_test_case_t hmac_test = {
    SHA1_BYTES, hmac_test_key, 8, hmac_test_data, SHA1_BYTES, hmac_test_tag, NULL};

static const srtp_auth_type_t hmac_type = {
    hmac_alloc, hmac_dealloc, hmac_init, hmac_compute, hmac_update, hmac_start,
    "HMAC-SHA1 (OpenSSL SHA-1)", &hmac_test, SRTP_HMAC_SHA1};

static srtp_err_status_t hmac_alloc(srtp_auth_pointer_t *ap, int key_len, int out_len) {
  if (key_len < 0 || key_len > SHA1_BYTES || out_len < 0 || out_len > SHA1_BYTES)
    return srtp_err_status_bad_param;
  srtp_auth_t *auth = calloc(1, sizeof(*auth));
  hmac_state *s = calloc(1, sizeof(*s));
  if (auth == NULL || s == NULL) {
    free(auth);
    free(s);
    return srtp_err_status_alloc_fail;
  }
  auth->type = &hmac_type;
  auth->state = s;
  auth->out_len = out_len;
  auth->key_len = key_len;
  auth->prefix_len = 0;
  *ap = auth;
  return srtp_err_status_ok;
}

static srtp_err_status_t hmac_dealloc(srtp_auth_pointer_t ap) {
  if (ap->state != NULL) {
    memset(ap->state, 0, sizeof(hmac_state));
    free(ap->state);
  }
  memset(ap, 0, sizeof(*ap));
  free(ap);
  return srtp_err_status_ok;
}

/* ---- AES-128 GCM (RFC 7714) ------------------------------------------------------------------ */

#define GCM_KEY_WITH_SALT_BYTES 28 /* libsrtp passes the salt too; it builds the IV with it */
#define GCM_IV_BYTES 12
#define GCM_MAX_TAG_BYTES 16

static srtp_err_status_t gcm_alloc(srtp_cipher_pointer_t *cp, int key_len, int tag_len);

static srtp_err_status_t gcm_init(void *state, const uint8_t *key) {
  evp_state *s = state;
  if (EVP_CipherInit_ex(s->evp, EVP_aes_128_gcm(), NULL, key, NULL, 1) != 1)
    return srtp_err_status_init_fail;
  return srtp_err_status_ok;
}

static srtp_err_status_t gcm_set_iv(void *state, uint8_t *iv, srtp_cipher_direction_t direction) {
  evp_state *s = state;
  if (direction != srtp_direction_encrypt && direction != srtp_direction_decrypt)
    return srtp_err_status_bad_param;
  s->encrypting = direction == srtp_direction_encrypt;
  if (EVP_CIPHER_CTX_ctrl(s->evp, EVP_CTRL_GCM_SET_IVLEN, GCM_IV_BYTES, NULL) != 1 ||
      EVP_CipherInit_ex(s->evp, NULL, NULL, NULL, iv, s->encrypting) != 1)
    return srtp_err_status_init_fail;
  return srtp_err_status_ok;
}

static srtp_err_status_t gcm_set_aad(void *state, const uint8_t *aad, uint32_t aad_len) {
  evp_state *s = state;
  int out = 0;
  if (EVP_CipherUpdate(s->evp, NULL, &out, aad, (int)aad_len) != 1)
    return srtp_err_status_algo_fail;
  return srtp_err_status_ok;
}

static srtp_err_status_t gcm_encrypt(void *state, uint8_t *buffer, unsigned int *octets) {
  evp_state *s = state;
  int out = 0;
  if (!s->encrypting || EVP_CipherUpdate(s->evp, buffer, &out, buffer, (int)*octets) != 1)
    return srtp_err_status_cipher_fail;
  return srtp_err_status_ok;
}

/* After encrypt: the tag, `tag_len` bytes, which libsrtp appends. */
static srtp_err_status_t gcm_get_tag(void *state, uint8_t *tag, uint32_t *len) {
  evp_state *s = state;
  int out = 0;
  uint8_t none[GCM_MAX_TAG_BYTES];
  if (EVP_CipherFinal_ex(s->evp, none, &out) != 1 ||
      EVP_CIPHER_CTX_ctrl(s->evp, EVP_CTRL_GCM_GET_TAG, s->tag_len, tag) != 1)
    return srtp_err_status_algo_fail;
  *len = (uint32_t)s->tag_len;
  return srtp_err_status_ok;
}

/* `octets` counts the tag at the end: checked, then cut off (the plain length is what is left). */
static srtp_err_status_t gcm_decrypt(void *state, uint8_t *buffer, unsigned int *octets) {
  evp_state *s = state;
  if (s->encrypting || *octets < (unsigned int)s->tag_len) return srtp_err_status_bad_param;
  int body = (int)*octets - s->tag_len;
  int out = 0;
  uint8_t none[GCM_MAX_TAG_BYTES];
  if (EVP_CIPHER_CTX_ctrl(s->evp, EVP_CTRL_GCM_SET_TAG, s->tag_len, buffer + body) != 1 ||
      EVP_CipherUpdate(s->evp, buffer, &out, buffer, body) != 1)
    return srtp_err_status_cipher_fail;
  if (EVP_CipherFinal_ex(s->evp, none, &out) != 1) return srtp_err_status_auth_fail;
  *octets = (unsigned int)body;
  return srtp_err_status_ok;
}

/* The GCM specification's test case 4 (key, IV, AAD and plaintext), with the 16- and 8-byte tag. */
static const uint8_t gcm_test_key[GCM_KEY_WITH_SALT_BYTES] = {
    0xfe, 0xff, 0xe9, 0x92, 0x86, 0x65, 0x73, 0x1c, 0x6d, 0x6a, 0x8f, 0x94, 0x67, 0x30,
    0x83, 0x08, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c};
static uint8_t gcm_test_iv[GCM_IV_BYTES] = {0xca, 0xfe, 0xba, 0xbe, 0xfa, 0xce,
                                            0xdb, 0xad, 0xde, 0xca, 0xf8, 0x88};
static const uint8_t gcm_test_aad[20] = {0xfe, 0xed, 0xfa, 0xce, 0xde, 0xad, 0xbe,
                                         0xef, 0xfe, 0xed, 0xfa, 0xce, 0xde, 0xad,
                                         0xbe, 0xef, 0xab, 0xad, 0xda, 0xd2};
static const uint8_t gcm_test_plaintext[60] = {
    0xd9, 0x31, 0x32, 0x25, 0xf8, 0x84, 0x06, 0xe5, 0xa5, 0x59, 0x09, 0xc5, 0xaf, 0xf5, 0x26,
    0x9a, 0x86, 0xa7, 0xa9, 0x53, 0x15, 0x34, 0xf7, 0xda, 0x2e, 0x4c, 0x30, 0x3d, 0x8a, 0x31,
    0x8a, 0x72, 0x1c, 0x3c, 0x0c, 0x95, 0x95, 0x68, 0x09, 0x53, 0x2f, 0xcf, 0x0e, 0x24, 0x49,
    0xa6, 0xb5, 0x25, 0xb1, 0x6a, 0xed, 0xf5, 0xaa, 0x0d, 0xe6, 0x57, 0xba, 0x63, 0x7b, 0x39};
static const uint8_t gcm_test_ciphertext[76] = {
    0x42, 0x83, 0x1e, 0xc2, 0x21, 0x77, 0x74, 0x24, 0x4b, 0x72, 0x21, 0xb7, 0x84, 0xd0, 0xd4,
    0x9c, 0xe3, 0xaa, 0x21, 0x2f, 0x2c, 0x02, 0xa4, 0xe0, 0x35, 0xc1, 0x7e, 0x23, 0x29, 0xac,
    0xa1, 0x2e, 0x21, 0xd5, 0x14, 0xb2, 0x54, 0x66, 0x93, 0x1c, 0x7d, 0x8f, 0x6a, 0x5a, 0xac,
    0x84, 0xaa, 0x05, 0x1b, 0xa3, 0x0b, 0x39, 0x6a, 0x0a, 0xac, 0x97, 0x3d, 0x58, 0xe0, 0x91,
    /* the tag */
    0x5b, 0xc9, 0x4f, 0xbc, 0x32, 0x21, 0xa5, 0xdb, 0x94, 0xfa, 0xe9, 0x5a, 0xe7, 0x12, 0x1a,
    0x47};
static const srtp_cipher_test_case_t gcm_test_short_tag = {
    GCM_KEY_WITH_SALT_BYTES, gcm_test_key, gcm_test_iv, 60, gcm_test_plaintext, 68,
    gcm_test_ciphertext,     20,           gcm_test_aad, 8,  NULL};
static const srtp_cipher_test_case_t gcm_test = {
    GCM_KEY_WITH_SALT_BYTES, gcm_test_key, gcm_test_iv, 60, gcm_test_plaintext, 76,
    gcm_test_ciphertext,     20,           gcm_test_aad, 16, &gcm_test_short_tag};

static const srtp_cipher_type_t gcm_type = {
    gcm_alloc,  evp_cipher_dealloc, gcm_init, gcm_set_aad, gcm_encrypt, gcm_decrypt, gcm_set_iv,
    gcm_get_tag, "AES-128 GCM (OpenSSL)", &gcm_test, SRTP_AES_GCM_128};

static srtp_err_status_t gcm_alloc(srtp_cipher_pointer_t *cp, int key_len, int tag_len) {
  if (key_len != GCM_KEY_WITH_SALT_BYTES || (tag_len != 8 && tag_len != GCM_MAX_TAG_BYTES))
    return srtp_err_status_bad_param;
  return evp_cipher_alloc(cp, &gcm_type, SRTP_AES_GCM_128, key_len, tag_len);
}

/* ---- registration -------------------------------------------------------------------------- */

int callgate_srtp_use_openssl(void) {
  int swapped = 0;
  if (srtp_replace_cipher_type(&icm_type, SRTP_AES_ICM_128) == srtp_err_status_ok)
    swapped |= CALLGATE_SRTP_OPENSSL_AES_CM;
  if (srtp_replace_auth_type(&hmac_type, SRTP_HMAC_SHA1) == srtp_err_status_ok)
    swapped |= CALLGATE_SRTP_OPENSSL_HMAC_SHA1;
  if (srtp_replace_cipher_type(&gcm_type, SRTP_AES_GCM_128) == srtp_err_status_ok)
    swapped |= CALLGATE_SRTP_OPENSSL_AES_GCM;
  return swapped;
}

#endif /* CALLGATE_HAVE_LIBSRTP */
