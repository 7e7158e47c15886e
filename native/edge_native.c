// edge-gateway's own native addon (Node-API, C): what Node cannot do from JavaScript.
//   rs485Get(fd)            TIOCGRS485: the port's RS-485 settings as an object
//   rs485Set(fd, options)   TIOCSRS485: sets them; returns what the driver accepted
//   rs485Encode(options)    the struct serial_rs485 rs485Set passes, as bytes (tests check it)
//   lowLatencySet(fd, on)   TIOCGSERIAL/TIOCSSERIAL: the port's ASYNC_LOW_LATENCY flag
//   mallocTrim()            glibc's malloc_trim(0): 1 if memory was given back, else 0
// A failed ioctl throws an Error whose `code` is the errno's name (ENOTTY, EBADF) and whose
// `errno` is its number. Built by scripts/native.mjs (build.mjs, scripts/build-exe.mjs).
#define NAPI_VERSION 8
#include <errno.h>
#include <linux/serial.h>
#include <malloc.h>
#include <node_api.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <uv.h>

static const struct {
  const char *name;
  uint32_t flag;
} FLAGS[] = {
    {"enabled", SER_RS485_ENABLED},
    {"rtsOnSend", SER_RS485_RTS_ON_SEND},
    {"rtsAfterSend", SER_RS485_RTS_AFTER_SEND},
    {"rxDuringTx", SER_RS485_RX_DURING_TX},
};

static napi_value throw_errno(napi_env env, int err, const char *call) {
  char text[160];
  const char *name = uv_err_name(-err);
  snprintf(text, sizeof text, "%s: %s, %s", name, strerror(err), call);
  napi_value code, msg, error, number;
  napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &code);
  napi_create_string_utf8(env, text, NAPI_AUTO_LENGTH, &msg);
  napi_create_error(env, code, msg, &error);
  napi_create_int32(env, err, &number);
  napi_set_named_property(env, error, "errno", number);
  napi_throw(env, error);
  return NULL;
}

static napi_value throw_type(napi_env env, const char *text) {
  napi_throw_type_error(env, NULL, text);
  return NULL;
}

static int arg_fd(napi_env env, napi_value v, int *fd) {
  napi_valuetype t;
  napi_typeof(env, v, &t);
  return t == napi_number && napi_get_value_int32(env, v, fd) == napi_ok;
}

// struct serial_rs485 from {enabled, rtsOnSend, rtsAfterSend, rxDuringTx, delayRtsBeforeSend,
// delayRtsAfterSend}: absent booleans are false, absent delays 0; every other byte is 0.
static int from_options(napi_env env, napi_value o, struct serial_rs485 *r) {
  napi_valuetype t;
  napi_typeof(env, o, &t);
  if (t != napi_object) return 0;
  memset(r, 0, sizeof *r);
  for (size_t i = 0; i < sizeof FLAGS / sizeof FLAGS[0]; i++) {
    napi_value v;
    bool on = false;
    napi_get_named_property(env, o, FLAGS[i].name, &v);
    napi_typeof(env, v, &t);
    if (t == napi_boolean) napi_get_value_bool(env, v, &on);
    else if (t != napi_undefined) return 0;
    if (on) r->flags |= FLAGS[i].flag;
  }
  const char *delays[] = {"delayRtsBeforeSend", "delayRtsAfterSend"};
  uint32_t *fields[] = {&r->delay_rts_before_send, &r->delay_rts_after_send};
  for (int i = 0; i < 2; i++) {
    napi_value v;
    napi_get_named_property(env, o, delays[i], &v);
    napi_typeof(env, v, &t);
    if (t == napi_number) napi_get_value_uint32(env, v, fields[i]);
    else if (t != napi_undefined) return 0;
  }
  return 1;
}

static napi_value to_object(napi_env env, const struct serial_rs485 *r) {
  napi_value o, v;
  napi_create_object(env, &o);
  for (size_t i = 0; i < sizeof FLAGS / sizeof FLAGS[0]; i++) {
    napi_get_boolean(env, (r->flags & FLAGS[i].flag) != 0, &v);
    napi_set_named_property(env, o, FLAGS[i].name, v);
  }
  napi_create_uint32(env, r->delay_rts_before_send, &v);
  napi_set_named_property(env, o, "delayRtsBeforeSend", v);
  napi_create_uint32(env, r->delay_rts_after_send, &v);
  napi_set_named_property(env, o, "delayRtsAfterSend", v);
  return o;
}

static napi_value rs485_get(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  int fd;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 1 || !arg_fd(env, argv[0], &fd)) return throw_type(env, "rs485Get(fd): fd must be a number");
  struct serial_rs485 r;
  memset(&r, 0, sizeof r);
  if (ioctl(fd, TIOCGRS485, &r) < 0) return throw_errno(env, errno, "ioctl TIOCGRS485");
  return to_object(env, &r);
}

static napi_value rs485_set(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  int fd;
  struct serial_rs485 r;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 2 || !arg_fd(env, argv[0], &fd)) return throw_type(env, "rs485Set(fd, options): fd must be a number");
  if (!from_options(env, argv[1], &r)) return throw_type(env, "rs485Set(fd, options): bad options");
  // The driver writes back what it applied (it may clear flags it lacks or clamp the delays).
  if (ioctl(fd, TIOCSRS485, &r) < 0) return throw_errno(env, errno, "ioctl TIOCSRS485");
  return to_object(env, &r);
}

static napi_value rs485_encode(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1], out;
  struct serial_rs485 r;
  void *data;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 1 || !from_options(env, argv[0], &r)) return throw_type(env, "rs485Encode(options): bad options");
  napi_create_buffer_copy(env, sizeof r, &r, &data, &out);
  return out;
}

static napi_value low_latency_set(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  int fd;
  bool on = false;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 2 || !arg_fd(env, argv[0], &fd) || napi_get_value_bool(env, argv[1], &on) != napi_ok)
    return throw_type(env, "lowLatencySet(fd, on): a number and a boolean");
  struct serial_struct ss;
  memset(&ss, 0, sizeof ss);
  if (ioctl(fd, TIOCGSERIAL, &ss) < 0) return throw_errno(env, errno, "ioctl TIOCGSERIAL");
  if (on) ss.flags |= ASYNC_LOW_LATENCY;
  else ss.flags &= ~ASYNC_LOW_LATENCY;
  if (ioctl(fd, TIOCSSERIAL, &ss) < 0) return throw_errno(env, errno, "ioctl TIOCSSERIAL");
  return NULL;
}

static napi_value malloc_trim_(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value out;
  napi_create_int32(env, malloc_trim(0), &out);
  return out;
}

NAPI_MODULE_INIT() {
  const napi_property_descriptor props[] = {
      {"rs485Get", NULL, rs485_get, NULL, NULL, NULL, napi_enumerable, NULL},
      {"rs485Set", NULL, rs485_set, NULL, NULL, NULL, napi_enumerable, NULL},
      {"rs485Encode", NULL, rs485_encode, NULL, NULL, NULL, napi_enumerable, NULL},
      {"lowLatencySet", NULL, low_latency_set, NULL, NULL, NULL, napi_enumerable, NULL},
      {"mallocTrim", NULL, malloc_trim_, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  return exports;
}
