/*
 * RTP sockets without a JavaScript call per datagram.
 *
 * Node's dgram costs about 4 µs of CPU per received datagram (a 64 KB allocation shrunk to fit,
 * a Buffer, an rinfo object with a fresh address string, a MakeCallback) and about 2 µs per send
 * (argument checks, a request object, the address parsed again), on top of the kernel's own work.
 * A media gateway moves two datagrams per call every 20 ms, so that is most of its CPU.
 *
 * Here the sockets are plain non-blocking UDP sockets registered in one epoll set, and that set
 * is one handle on Node's event loop. When any socket is readable, every ready socket is read
 * (recvmmsg, several datagrams per system call) and the datagrams go to JavaScript in batches:
 * one call with a fresh buffer holding the payloads back to back and a shared Int32Array saying
 * which socket, where, how long and from whom. Sends go straight to sendmsg, to a destination
 * parsed once per change.
 *
 * Exported (all synchronous, errors thrown with the errno name as `code`):
 *   start(onBatch, meta)             onBatch(data: Buffer, count: number); meta: Int32Array of
 *                                    META_INTS per datagram, reused for every batch (not on a
 *                                    resizable or growable buffer; detached later, nothing more is
 *                                    read and an uncaught ERR_INVALID_STATE is raised once)
 *   open(ipv6, address, port)        a bound socket, registered for reading: [fd, generation]
 *                                    (the generation tells this socket from a later one that gets
 *                                    the same descriptor; meta carries both for every datagram)
 *   setRemote(fd, address, port)     where send() sends; false if the address is not an IP literal
 *   send(fd, buf [, buf2]) -> n      one datagram (two buffers are gathered); -errno on failure
 *   close(fd)
 *   constants: META_INTS, BATCH_DATAGRAMS (the meta array holds that many), SLOT_BYTES
 *   (datagrams longer are reported with their full length and their first SLOT_BYTES bytes)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <node_api.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

/* Per datagram in meta: fd, offset, length, port, family (4 or 6), the source address as four
   32-bit words in network byte order (IPv4: the first word only), then the socket's generation. */
#define META_INTS 10
/* Datagrams per batch, and payload bytes per batch buffer. A batch's buffer stays under glibc's
   mmap threshold (128 KB): larger ones were mapped and page-faulted anew for every batch (3.6 µs
   of system CPU per received datagram at 256 KB, 2.6 at 64 KB, in a flood of 100 sockets). */
#define BATCH_DATAGRAMS 512
#define BATCH_BYTES (64 * 1024)
/* Bytes kept of one datagram: more than any RTP packet callgate accepts (1,500), so a longer
   one is still seen as too large. */
#define SLOT_BYTES 2048
/* Datagrams per recvmmsg call, and events per epoll_wait. */
#define RECV_VLEN 8
#define EPOLL_EVENTS 256
/* Datagrams read per wake-up at most, so timers are not starved by a flood; the rest are read on
   the next loop iteration (the epoll set stays readable). */
#define MAX_DATAGRAMS_PER_WAKEUP 4096

typedef struct {
  struct sockaddr_storage addr;
  socklen_t len;
  /* Opened by this module and not closed: no other descriptor is ever read, sent on or closed. */
  int owned;
  /* Which opening of this descriptor number (see open()). */
  uint32_t generation;
} remote_t;

typedef struct {
  napi_env env;
  int epfd;
  uv_poll_t poll;
  int poll_open;
  int polling;
  /* The meta array was detached (or shrank) after start(): nothing is read any more. */
  int meta_lost;
  int sockets;
  uint32_t generations;
  /* Teardown (see on_environment_end): the loop handle's close has begun, has ended, and the
     instance data finalizer has run. The state is freed by whichever of the last two is second. */
  napi_async_cleanup_hook_handle cleanup;
  int closing;
  int closed;
  int finalized;
  napi_ref on_batch;
  napi_ref meta_ref;
  /* Where meta's elements are now, and how many datagrams it holds (at most BATCH_DATAGRAMS; 0 when
     detached or too short): read again from meta_ref at each wake-up and after each batch that more
     reading follows, since JavaScript may detach its buffer whenever it runs. */
  int32_t *meta;
  int meta_capacity;
  napi_async_context context;
  /* Indexed by fd. */
  remote_t *remotes;
  int remotes_len;
  /* Where recvmmsg writes, before the payloads are packed into the batch. */
  unsigned char scratch[RECV_VLEN][SLOT_BYTES];
  /* The batch's payloads back to back, copied into a buffer of their exact size when delivered
     (a buffer per batch of its whole capacity would be hundreds of MB a second of external
     memory, and V8 answers that with full collections). */
  unsigned char staging[BATCH_BYTES];
  struct sockaddr_storage sources[RECV_VLEN];
} state_t;

static napi_value throw_errno(napi_env env, int err, const char *what) {
  char message[160];
  snprintf(message, sizeof message, "%s: %s", what, strerror(err));
  napi_throw_error(env, uv_err_name(uv_translate_sys_error(err)), message);
  return NULL;
}

static napi_value throw_type(napi_env env, const char *message) {
  napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", message);
  return NULL;
}

/* An address argument: a string that fits and holds no NUL (which C would read as its end, and
   so take "127.0.0.1\0junk" for 127.0.0.1). */
static int get_address(napi_env env, napi_value value, char *out, size_t size) {
  size_t length = 0;
  if (napi_get_value_string_utf8(env, value, out, size, &length) != napi_ok) return -1;
  if (length >= size - 1 || strlen(out) != length) return 0;
  return 1;
}

static state_t *get_state(napi_env env) {
  void *data = NULL;
  napi_get_instance_data(env, &data);
  return (state_t *)data;
}

static int parse_address(const char *text, int ipv6_socket, uint16_t port, remote_t *out) {
  memset(out, 0, sizeof *out);
  if (!ipv6_socket) {
    struct sockaddr_in *sin = (struct sockaddr_in *)&out->addr;
    if (inet_pton(AF_INET, text, &sin->sin_addr) != 1) return 0;
    sin->sin_family = AF_INET;
    sin->sin_port = htons(port);
    out->len = sizeof *sin;
    return 1;
  }
  struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&out->addr;
  sin6->sin6_family = AF_INET6;
  sin6->sin6_port = htons(port);
  out->len = sizeof *sin6;
  if (inet_pton(AF_INET6, text, &sin6->sin6_addr) == 1) return 1;
  /* An IPv4 address on a dual-stack IPv6 socket, as Node does: ::ffff:a.b.c.d */
  struct in_addr v4;
  if (inet_pton(AF_INET, text, &v4) != 1) return 0;
  sin6->sin6_addr.s6_addr[10] = 0xff;
  sin6->sin6_addr.s6_addr[11] = 0xff;
  memcpy(&sin6->sin6_addr.s6_addr[12], &v4, 4);
  return 1;
}

static int socket_is_ipv6(int fd) {
  struct sockaddr_storage local;
  socklen_t len = sizeof local;
  if (getsockname(fd, (struct sockaddr *)&local, &len) != 0) return 0;
  return local.ss_family == AF_INET6;
}

/* Points s->meta at the meta array's elements as they are now and sets s->meta_capacity. Needs an
   open handle scope. */
static void refresh_meta(state_t *s) {
  napi_value meta = NULL;
  size_t length = 0;
  void *data = NULL;
  s->meta_capacity = 0;
  /* Its type was checked by start() and cannot change. */
  if (napi_get_reference_value(s->env, s->meta_ref, &meta) != napi_ok || meta == NULL ||
      napi_get_typedarray_info(s->env, meta, NULL, &length, &data, NULL, NULL) != napi_ok ||
      data == NULL || length < META_INTS) {
    return;
  }
  s->meta = (int32_t *)data;
  size_t capacity = length / META_INTS;
  s->meta_capacity = capacity > BATCH_DATAGRAMS ? BATCH_DATAGRAMS : (int)capacity;
}

/* Hands the datagrams staged so far to JavaScript, then, when more is to be read in this wake-up,
   looks at meta again (the handler may have detached it; the next wake-up looks anyway). Returns 0
   when JavaScript threw (the exception has been raised as uncaught) or the batch could not be made.
   Runs in the wake-up's handle scope (one per wake-up, not per batch: a few handles per batch,
   kept until the wake-up ends). */
static int deliver(state_t *s, size_t used, int count, int more) {
  napi_env env = s->env;
  napi_value callback = NULL, global = NULL, result = NULL;
  napi_value argv[2] = {NULL, NULL};
  void *copy = NULL;
  int ok = napi_create_buffer_copy(env, used, s->staging, &copy, &argv[0]) == napi_ok &&
           napi_create_int32(env, count, &argv[1]) == napi_ok &&
           napi_get_reference_value(env, s->on_batch, &callback) == napi_ok && callback != NULL &&
           napi_get_global(env, &global) == napi_ok;
  if (ok) {
    napi_status status = napi_make_callback(env, s->context, global, callback, 2, argv, &result);
    if (status == napi_pending_exception) {
      napi_value error;
      napi_get_and_clear_last_exception(env, &error);
      napi_fatal_exception(env, error);
      ok = 0;
    } else if (status != napi_ok) {
      ok = 0;
    }
  }
  if (more) refresh_meta(s);
  return ok;
}

/* A socket of this module's, open now. */
static int owns(const state_t *s, int fd) {
  return fd >= 0 && fd < s->remotes_len && s->remotes[fd].owned;
}

/* Still the socket that was ready: JavaScript may have closed it during a batch, and the number
   may since name another socket of this module or any other descriptor of the process. */
static int still_open(const state_t *s, int fd, uint32_t generation) {
  return owns(s, fd) && s->remotes[fd].generation == generation;
}

static void on_readable(uv_poll_t *handle, int status, int events);

static void update_polling(state_t *s) {
  if (!s->poll_open || s->closing) return;
  if (s->sockets > 0 && !s->meta_lost && !s->polling) {
    /* Cannot fail for a live handle on a valid epoll descriptor; if it did, nothing would be read. */
    s->polling = uv_poll_start(&s->poll, UV_READABLE, on_readable) == 0;
  } else if ((s->sockets == 0 || s->meta_lost) && s->polling) {
    uv_poll_stop(&s->poll);
    s->polling = 0;
  }
}

/* JavaScript detached the meta array's buffer: there is nowhere to say where a datagram is. The
   datagrams stay in the kernel, the loop stops watching the sockets (they would stay readable, and
   every loop iteration would come back here), and the misuse is raised as uncaught, once. Needs an
   open handle scope. */
static void stop_for_lost_meta(state_t *s) {
  if (s->meta_lost) return;
  s->meta_lost = 1;
  update_polling(s);
  napi_env env = s->env;
  napi_value code, message, error;
  if (napi_create_string_utf8(env, "ERR_INVALID_STATE", NAPI_AUTO_LENGTH, &code) == napi_ok &&
      napi_create_string_utf8(env, "native RTP sockets: the meta array was detached or shrunk after start(); nothing more is received",
                              NAPI_AUTO_LENGTH, &message) == napi_ok &&
      napi_create_error(env, code, message, &error) == napi_ok) {
    napi_fatal_exception(env, error);
  }
}

static void on_readable(uv_poll_t *handle, int status, int events) {
  (void)events;
  state_t *s = (state_t *)handle->data;
  if (status < 0) return;
  napi_handle_scope scope;
  if (napi_open_handle_scope(s->env, &scope) != napi_ok) return;
  refresh_meta(s);

  struct epoll_event ready[EPOLL_EVENTS];
  struct mmsghdr msgs[RECV_VLEN];
  struct iovec iovs[RECV_VLEN];
  size_t used = 0;
  int count = 0;
  int total = 0;
  /* Cleared when a batch could not be delivered (its handler threw) or meta is gone: no more is
     read in this wake-up. */
  int alive = s->meta_capacity > 0;

  int again = 1;
  while (alive && again && total < MAX_DATAGRAMS_PER_WAKEUP) {
    int n = epoll_wait(s->epfd, ready, EPOLL_EVENTS, 0);
    if (n <= 0) break;
    /* Another round only when this one may have left datagrams behind (more ready sockets than
       fit, or a socket with more than one read takes); what arrives later wakes the loop again,
       so a wake-up that reads one datagram per socket ends without a second epoll_wait. */
    again = n == EPOLL_EVENTS;
    for (int i = 0; i < n && alive; i++) {
      int fd = (int)(ready[i].data.u64 & 0xffffffffu);
      uint32_t generation = (uint32_t)(ready[i].data.u64 >> 32);
      /* ready[] was taken before the batches delivered since. */
      if (!still_open(s, fd, generation)) continue;
      /* No more datagrams than the batch has room for, so a batch is handed over between reads,
         never in the middle of one: when its handler throws, nothing is left that was taken from
         the kernel and not delivered, and what is not read yet is read on the next wake-up. */
      int room = s->meta_capacity - count;
      int slots = (int)((BATCH_BYTES - used) / SLOT_BYTES);
      if (room > slots) room = slots;
      if (room > RECV_VLEN) room = RECV_VLEN;
      for (int k = 0; k < room; k++) {
        iovs[k].iov_base = s->scratch[k];
        iovs[k].iov_len = SLOT_BYTES;
        memset(&msgs[k].msg_hdr, 0, sizeof msgs[k].msg_hdr);
        msgs[k].msg_hdr.msg_iov = &iovs[k];
        msgs[k].msg_hdr.msg_iovlen = 1;
        msgs[k].msg_hdr.msg_name = &s->sources[k];
        msgs[k].msg_hdr.msg_namelen = sizeof s->sources[k];
        msgs[k].msg_len = 0;
      }
      /* MSG_TRUNC: a datagram longer than its slot reports its full length. */
      int got = recvmmsg(fd, msgs, (unsigned int)room, MSG_DONTWAIT | MSG_TRUNC, NULL);
      if (got <= 0) continue; /* EAGAIN, or an ICMP error reported on this socket: nothing to read. */
      if (got == room) again = 1;
      for (int k = 0; k < got; k++) {
        unsigned int length = msgs[k].msg_len;
        unsigned int kept = length < SLOT_BYTES ? length : SLOT_BYTES;
        memcpy(s->staging + used, s->scratch[k], kept);
        int32_t *m = s->meta + (size_t)count * META_INTS;
        m[0] = fd;
        m[1] = (int32_t)used;
        m[2] = (int32_t)length;
        struct sockaddr_storage *from = &s->sources[k];
        if (from->ss_family == AF_INET6) {
          struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)from;
          m[3] = ntohs(sin6->sin6_port);
          m[4] = 6;
          memcpy(&m[5], &sin6->sin6_addr, 16);
        } else {
          struct sockaddr_in *sin = (struct sockaddr_in *)from;
          m[3] = ntohs(sin->sin_port);
          m[4] = 4;
          memcpy(&m[5], &sin->sin_addr, 4);
          m[6] = m[7] = m[8] = 0;
        }
        m[9] = (int32_t)generation;
        used += kept;
        count++;
        total++;
      }
      if (count >= s->meta_capacity || used + SLOT_BYTES > BATCH_BYTES) {
        alive = deliver(s, used, count, 1) && s->meta_capacity > 0;
        used = 0;
        count = 0;
      }
    }
  }
  if (alive && count > 0) deliver(s, used, count, 0);
  if (s->meta_capacity == 0) stop_for_lost_meta(s);
  napi_close_handle_scope(s->env, scope);
}

static void on_environment_end(napi_async_cleanup_hook_handle handle, void *arg);

static napi_value js_start(napi_env env, napi_callback_info info) {
  state_t *s = get_state(env);
  size_t argc = 2;
  napi_value argv[2];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (s->poll_open) {
    napi_throw_error(env, "ERR_ALREADY_STARTED", "native RTP sockets already started");
    return NULL;
  }
  napi_valuetype type;
  napi_typeof(env, argv[0], &type);
  if (argc < 2 || type != napi_function) return throw_type(env, "start(onBatch, meta): onBatch must be a function");
  bool is_typed = false;
  napi_is_typedarray(env, argv[1], &is_typed);
  if (!is_typed) return throw_type(env, "start(onBatch, meta): meta must be an Int32Array");
  napi_typedarray_type ta_type;
  size_t length;
  napi_value buffer;
  napi_get_typedarray_info(env, argv[1], &ta_type, &length, NULL, &buffer, NULL);
  if (ta_type != napi_int32_array || length < META_INTS) return throw_type(env, "start(onBatch, meta): meta must be an Int32Array of at least META_INTS");
  /* Node-API cannot tell a resizable ArrayBuffer (or a growable SharedArrayBuffer) from another;
     JavaScript can. Such a buffer could shrink under the module between two batches. (Each
     wake-up looks at meta again anyway, which also catches a buffer detached after start().) */
  const char *resizing[] = {"resizable", "growable"};
  for (size_t i = 0; i < 2; i++) {
    napi_value flag;
    bool set = false;
    if (napi_get_named_property(env, buffer, resizing[i], &flag) != napi_ok) return NULL;
    napi_valuetype flag_type;
    napi_typeof(env, flag, &flag_type);
    if (flag_type == napi_boolean) napi_get_value_bool(env, flag, &set);
    if (set) return throw_type(env, "start(onBatch, meta): meta must not be on a resizable or growable buffer");
  }

  s->epfd = epoll_create1(EPOLL_CLOEXEC);
  if (s->epfd < 0) {
    int err = errno;
    s->epfd = -1;
    return throw_errno(env, err, "epoll_create1");
  }
  /* The hook before the handle: without it the handle would outlive the module at a worker's end,
     so start() is refused, and there is no handle yet to close (uv_close completes only on a later
     loop iteration, by when the state it lives in may be freed or the handle initialized again). */
  if (napi_add_async_cleanup_hook(env, on_environment_end, s, &s->cleanup) != napi_ok) {
    close(s->epfd);
    s->epfd = -1;
    napi_throw_error(env, "EIO", "native RTP sockets: no cleanup hook");
    return NULL;
  }
  uv_loop_t *loop = NULL;
  napi_get_uv_event_loop(env, &loop);
  int err = uv_poll_init(loop, &s->poll, s->epfd);
  if (err != 0) {
    /* A failed uv_poll_init leaves no handle on the loop. */
    napi_remove_async_cleanup_hook(s->cleanup);
    s->cleanup = NULL;
    close(s->epfd);
    s->epfd = -1;
    napi_throw_error(env, uv_err_name(err), "uv_poll_init failed");
    return NULL;
  }
  s->poll.data = s;
  s->poll_open = 1;
  napi_create_reference(env, argv[0], 1, &s->on_batch);
  napi_create_reference(env, argv[1], 1, &s->meta_ref);
  refresh_meta(s);
  napi_value resource_name;
  napi_create_string_utf8(env, "callgate.rtp", NAPI_AUTO_LENGTH, &resource_name);
  napi_async_init(env, NULL, resource_name, &s->context);
  return NULL;
}

/* The descriptor, argv[0] of a call that needs `needed` arguments; throws (usage, or a bad fd)
   and returns 0 otherwise. */
static int fd_argument(napi_env env, size_t argc, size_t needed, napi_value *argv, const char *usage, int *fd) {
  if (argc < needed) {
    throw_type(env, usage);
    return 0;
  }
  if (napi_get_value_int32(env, argv[0], fd) != napi_ok || *fd < 0) {
    throw_type(env, "fd must be a non-negative integer");
    return 0;
  }
  return 1;
}

static napi_value js_open(napi_env env, napi_callback_info info) {
  state_t *s = get_state(env);
  if (!s->poll_open) {
    napi_throw_error(env, "ERR_NOT_STARTED", "native RTP sockets not started");
    return NULL;
  }
  size_t argc = 3;
  napi_value argv[3];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  bool ipv6 = false;
  char address[64];
  uint32_t port = 0;
  int address_ok = argc < 3 ? -1 : get_address(env, argv[1], address, sizeof address);
  if (argc < 3 || napi_get_value_bool(env, argv[0], &ipv6) != napi_ok || address_ok < 0 ||
      napi_get_value_uint32(env, argv[2], &port) != napi_ok || port > 65535) {
    return throw_type(env, "open(ipv6: boolean, address: string, port: 0..65535)");
  }
  remote_t local;
  if (!address_ok || !parse_address(address, ipv6, (uint16_t)port, &local)) {
    napi_throw_error(env, "EINVAL", "open: the listen address is not an IP literal of the socket's family");
    return NULL;
  }
  int fd = socket(ipv6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return throw_errno(env, errno, "socket");
  if (bind(fd, (struct sockaddr *)&local.addr, local.len) != 0) {
    int err = errno;
    close(fd);
    return throw_errno(env, err, "bind");
  }
  uint32_t generation = ++s->generations;
  struct epoll_event event;
  memset(&event, 0, sizeof event);
  event.events = EPOLLIN;
  event.data.u64 = ((uint64_t)generation << 32) | (uint32_t)fd;
  if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &event) != 0) {
    int err = errno;
    close(fd);
    return throw_errno(env, err, "epoll_ctl");
  }
  if (fd >= s->remotes_len) {
    int len = s->remotes_len == 0 ? 1024 : s->remotes_len;
    while (len <= fd) len *= 2;
    remote_t *grown = realloc(s->remotes, (size_t)len * sizeof *grown);
    if (grown == NULL) {
      epoll_ctl(s->epfd, EPOLL_CTL_DEL, fd, NULL);
      close(fd);
      return throw_errno(env, ENOMEM, "open");
    }
    memset(grown + s->remotes_len, 0, (size_t)(len - s->remotes_len) * sizeof *grown);
    s->remotes = grown;
    s->remotes_len = len;
  }
  memset(&s->remotes[fd], 0, sizeof s->remotes[fd]);
  s->remotes[fd].owned = 1;
  s->remotes[fd].generation = generation;
  s->sockets++;
  update_polling(s);
  napi_value result, fd_value, generation_value;
  napi_create_array_with_length(env, 2, &result);
  napi_create_int32(env, fd, &fd_value);
  napi_create_int32(env, (int32_t)generation, &generation_value);
  napi_set_element(env, result, 0, fd_value);
  napi_set_element(env, result, 1, generation_value);
  return result;
}

static napi_value js_set_remote(napi_env env, napi_callback_info info) {
  state_t *s = get_state(env);
  size_t argc = 3;
  napi_value argv[3];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  int fd;
  char address[64];
  uint32_t port = 0;
  if (!fd_argument(env, argc, 3, argv, "setRemote(fd, address: string, port: 0..65535)", &fd)) return NULL;
  int address_ok = get_address(env, argv[1], address, sizeof address);
  if (address_ok < 0 || napi_get_value_uint32(env, argv[2], &port) != napi_ok || port > 65535) {
    return throw_type(env, "setRemote(fd, address: string, port: 0..65535)");
  }
  if (!owns(s, fd)) return throw_errno(env, EBADF, "setRemote");
  napi_value result;
  remote_t parsed;
  int ok = address_ok && parse_address(address, socket_is_ipv6(fd), (uint16_t)port, &parsed);
  if (ok) {
    parsed.owned = 1;
    parsed.generation = s->remotes[fd].generation;
    s->remotes[fd] = parsed;
  }
  napi_get_boolean(env, ok, &result);
  return result;
}

static napi_value js_send(napi_env env, napi_callback_info info) {
  state_t *s = get_state(env);
  size_t argc = 3;
  napi_value argv[3];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  int fd;
  if (!fd_argument(env, argc, 2, argv, "send(fd, buffer [, buffer])", &fd)) return NULL;
  struct iovec iov[2];
  size_t parts = argc >= 3 ? 2 : 1;
  for (size_t i = 0; i < parts; i++) {
    void *data;
    size_t length;
    if (napi_get_buffer_info(env, argv[1 + i], &data, &length) != napi_ok) return throw_type(env, "send(fd, buffer [, buffer])");
    iov[i].iov_base = data;
    iov[i].iov_len = length;
  }
  int result_code;
  if (!owns(s, fd)) {
    result_code = -EBADF;
  } else if (s->remotes[fd].len == 0) {
    result_code = -EDESTADDRREQ;
  } else {
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_name = &s->remotes[fd].addr;
    msg.msg_namelen = s->remotes[fd].len;
    msg.msg_iov = iov;
    msg.msg_iovlen = parts;
    ssize_t sent;
    do {
      sent = sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    } while (sent < 0 && errno == EINTR);
    result_code = sent < 0 ? -errno : (int)sent;
  }
  napi_value result;
  napi_create_int32(env, result_code, &result);
  return result;
}

static napi_value js_close(napi_env env, napi_callback_info info) {
  state_t *s = get_state(env);
  size_t argc = 1;
  napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  int fd;
  if (!fd_argument(env, argc, 1, argv, "close(fd)", &fd)) return NULL;
  if (!owns(s, fd)) {
    /* Not one of ours (or closed already): never close a descriptor this module did not open. */
    return throw_errno(env, EBADF, "close");
  }
  epoll_ctl(s->epfd, EPOLL_CTL_DEL, fd, NULL);
  close(fd);
  memset(&s->remotes[fd], 0, sizeof s->remotes[fd]);
  s->sockets--;
  update_polling(s);
  return NULL;
}

static void free_state(state_t *s) {
  free(s->remotes);
  free(s);
}

static void on_poll_closed(uv_handle_t *handle) {
  state_t *s = (state_t *)handle->data;
  close(s->epfd);
  s->closed = 1;
  /* Node waits for this before it unloads the module: no callback of ours runs after it. */
  napi_remove_async_cleanup_hook(s->cleanup);
  if (s->finalized) free_state(s);
}

/* The environment (the process, or a worker thread) is ending: the sockets still open are closed
   with it, and the loop handle is closed before the module is unloaded. */
static void on_environment_end(napi_async_cleanup_hook_handle handle, void *arg) {
  (void)handle;
  state_t *s = (state_t *)arg;
  for (int fd = 0; fd < s->remotes_len; fd++) {
    if (s->remotes[fd].owned) close(fd);
    s->remotes[fd].owned = 0;
  }
  s->sockets = 0;
  s->closing = 1;
  uv_close((uv_handle_t *)&s->poll, on_poll_closed);
}

static void finalize_state(napi_env env, void *data, void *hint) {
  (void)hint;
  state_t *s = (state_t *)data;
  if (s->on_batch != NULL) napi_delete_reference(env, s->on_batch);
  if (s->meta_ref != NULL) napi_delete_reference(env, s->meta_ref);
  s->on_batch = NULL;
  s->meta_ref = NULL;
  if (s->poll_open) napi_async_destroy(env, s->context);
  s->finalized = 1;
  /* Never started, or its handle closed already. Otherwise the close under way frees it (or, had
     the cleanup hook not run, the process's end does). */
  if (!s->poll_open || s->closed) free_state(s);
}

static void export_function(napi_env env, napi_value exports, const char *name, napi_callback fn) {
  napi_value value;
  napi_create_function(env, name, NAPI_AUTO_LENGTH, fn, NULL, &value);
  napi_set_named_property(env, exports, name, value);
}

static void export_int(napi_env env, napi_value exports, const char *name, int32_t number) {
  napi_value value;
  napi_create_int32(env, number, &value);
  napi_set_named_property(env, exports, name, value);
}

NAPI_MODULE_INIT(/* napi_env env, napi_value exports */) {
  state_t *s = calloc(1, sizeof *s);
  if (s == NULL) {
    napi_throw_error(env, "ENOMEM", "native RTP sockets: out of memory");
    return NULL;
  }
  s->env = env;
  s->epfd = -1;
  napi_set_instance_data(env, s, finalize_state, NULL);
  export_function(env, exports, "start", js_start);
  export_function(env, exports, "open", js_open);
  export_function(env, exports, "setRemote", js_set_remote);
  export_function(env, exports, "send", js_send);
  export_function(env, exports, "close", js_close);
  export_int(env, exports, "META_INTS", META_INTS);
  export_int(env, exports, "SLOT_BYTES", SLOT_BYTES);
  export_int(env, exports, "BATCH_DATAGRAMS", BATCH_DATAGRAMS);
  return exports;
}
