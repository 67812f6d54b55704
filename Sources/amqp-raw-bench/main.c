// amqp-raw-bench: the baseline the Swift AMQP wrapper is measured against.
//
// Uses librabbitmq directly, with no work per message:
//   1. declares a durable queue (purged first);
//   2. publishes N persistent messages of SIZE bytes with publisher confirms, in windows: publish
//      WINDOW messages, wait until all of them are confirmed, repeat (the strategy the Swift side
//      uses through `publish([batch])`), timed;
//   3. consumes them with basic.qos PREFETCH and manual acks, one basic.ack per delivery, timed;
//   4. deletes the queue and prints one JSON line.
//
//   amqp-raw-bench --url amqp://user:pass@host:port/vhost --queue NAME --count N --size 1024
//                  --prefetch 100 --window 100 [--cacert ca.pem]
//
// Exit status 0 on success, 1 on any failure (with a message on stderr), 2 on bad usage.
#include <amqp.h>
#include <amqp_framing.h>
#include <amqp_ssl_socket.h>
#include <amqp_tcp_socket.h>

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

typedef struct {
    const char *url;
    const char *queue;
    const char *cacert;
    long count;
    long size;
    long prefetch;
    long window;
} options_t;

static void fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("amqp-raw-bench: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static void usage(const char *problem) {
    if (problem != NULL) {
        fprintf(stderr, "amqp-raw-bench: %s\n", problem);
    }
    fputs("usage: amqp-raw-bench --url amqp://user:pass@host:port/vhost --queue NAME --count N\n"
          "                      [--size 1024] [--prefetch 100] [--window 100] [--cacert ca.pem]\n",
          stderr);
    exit(2);
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long parse_positive(const char *name, const char *value) {
    char *end = NULL;
    errno = 0;
    long v = strtol(value, &end, 10);
    if (errno != 0 || end == value || *end != '\0' || v <= 0) {
        fprintf(stderr, "amqp-raw-bench: %s must be a positive integer, got '%s'\n", name, value);
        exit(2);
    }
    return v;
}

/// Describes a failed RPC (library error or the broker's close reason) and exits.
static void check_reply(amqp_rpc_reply_t reply, const char *what) {
    switch (reply.reply_type) {
    case AMQP_RESPONSE_NORMAL:
        return;
    case AMQP_RESPONSE_NONE:
        fail("%s: missing RPC reply", what);
        break;
    case AMQP_RESPONSE_LIBRARY_EXCEPTION:
        fail("%s: %s", what, amqp_error_string2(reply.library_error));
        break;
    case AMQP_RESPONSE_SERVER_EXCEPTION:
        if (reply.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
            amqp_connection_close_t *m = (amqp_connection_close_t *)reply.reply.decoded;
            fail("%s: connection closed by the broker: %u %.*s", what, m->reply_code, (int)m->reply_text.len,
                 (char *)m->reply_text.bytes);
        } else if (reply.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
            amqp_channel_close_t *m = (amqp_channel_close_t *)reply.reply.decoded;
            fail("%s: channel closed by the broker: %u %.*s", what, m->reply_code, (int)m->reply_text.len,
                 (char *)m->reply_text.bytes);
        } else {
            fail("%s: unexpected method %s from the broker", what, amqp_method_name(reply.reply.id));
        }
        break;
    }
    fail("%s: unknown reply type %d", what, (int)reply.reply_type);
}

static void check_status(int status, const char *what) {
    if (status != AMQP_STATUS_OK) {
        fail("%s: %s", what, amqp_error_string2(status));
    }
}

/// Fails on a method frame that ends the channel or connection, or that the benchmark does not expect.
static void fail_on_method(const amqp_frame_t *frame, const char *what) {
    if (frame->payload.method.id == AMQP_CHANNEL_CLOSE_METHOD) {
        amqp_channel_close_t *m = (amqp_channel_close_t *)frame->payload.method.decoded;
        fail("%s: channel closed by the broker: %u %.*s", what, m->reply_code, (int)m->reply_text.len,
             (char *)m->reply_text.bytes);
    }
    if (frame->payload.method.id == AMQP_CONNECTION_CLOSE_METHOD) {
        amqp_connection_close_t *m = (amqp_connection_close_t *)frame->payload.method.decoded;
        fail("%s: connection closed by the broker: %u %.*s", what, m->reply_code, (int)m->reply_text.len,
             (char *)m->reply_text.bytes);
    }
    if (frame->payload.method.id == AMQP_BASIC_RETURN_METHOD) {
        fail("%s: a message was returned as unroutable", what);
    }
    fail("%s: unexpected method %s", what, amqp_method_name(frame->payload.method.id));
}

static amqp_connection_state_t open_connection(const options_t *opt) {
    char *url = strdup(opt->url);
    if (url == NULL) {
        fail("out of memory");
    }
    struct amqp_connection_info info;
    amqp_default_connection_info(&info);
    int status = amqp_parse_url(url, &info);
    if (status != AMQP_STATUS_OK) {
        fprintf(stderr, "amqp-raw-bench: cannot parse --url: %s\n", amqp_error_string2(status));
        exit(2);
    }

    amqp_connection_state_t conn = amqp_new_connection();
    if (conn == NULL) {
        fail("out of memory");
    }
    amqp_socket_t *socket = NULL;
    if (info.ssl) {
        socket = amqp_ssl_socket_new(conn);
        if (socket == NULL) {
            fail("cannot create a TLS socket");
        }
        if (opt->cacert != NULL) {
            check_status(amqp_ssl_socket_set_cacert(socket, opt->cacert), "loading --cacert");
        }
    } else {
        socket = amqp_tcp_socket_new(conn);
        if (socket == NULL) {
            fail("cannot create a TCP socket");
        }
    }
    struct timeval timeout = {.tv_sec = 10, .tv_usec = 0};
    status = amqp_socket_open_noblock(socket, info.host, info.port, &timeout);
    if (status != AMQP_STATUS_OK) {
        fail("cannot connect to %s:%d: %s", info.host, info.port, amqp_error_string2(status));
    }
    check_reply(amqp_login(conn, info.vhost, 0, AMQP_DEFAULT_FRAME_SIZE, 0, AMQP_SASL_METHOD_PLAIN, info.user,
                           info.password),
                "login");
    free(url);
    return conn;
}

static void open_channel(amqp_connection_state_t conn, amqp_channel_t channel) {
    amqp_channel_open(conn, channel);
    check_reply(amqp_get_rpc_reply(conn), "channel.open");
}

/// Publishes `count` messages in windows of `window`, waiting for every confirm of a window.
static void publish_all(amqp_connection_state_t conn, amqp_channel_t channel, const options_t *opt,
                        amqp_bytes_t queue, amqp_bytes_t body) {
    amqp_confirm_select(conn, channel);
    check_reply(amqp_get_rpc_reply(conn), "confirm.select");

    amqp_basic_properties_t props;
    memset(&props, 0, sizeof props);
    props._flags = AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_CONTENT_TYPE_FLAG;
    props.delivery_mode = 2;  // persistent
    props.content_type = amqp_cstring_bytes("application/octet-stream");

    // Delivery tags of publisher confirms count from 1. `settled[i]` marks tag `base + i` of the
    // current window; confirms come one by one or as `multiple` (every tag up to this one).
    unsigned char *settled = calloc((size_t)opt->window, 1);
    if (settled == NULL) {
        fail("out of memory");
    }
    uint64_t published = 0;
    while (published < (uint64_t)opt->count) {
        uint64_t base = published + 1;
        uint64_t size = (uint64_t)opt->window;
        if (size > (uint64_t)opt->count - published) {
            size = (uint64_t)opt->count - published;
        }
        memset(settled, 0, (size_t)opt->window);
        for (uint64_t i = 0; i < size; i++) {
            check_status(amqp_basic_publish(conn, channel, amqp_empty_bytes, queue, 1, 0, &props, body),
                         "basic.publish");
        }
        published += size;
        uint64_t unsettled = size;
        while (unsettled > 0) {
            amqp_frame_t frame;
            check_status(amqp_simple_wait_frame(conn, &frame), "waiting for confirms");
            if (frame.frame_type != AMQP_FRAME_METHOD) {
                continue;
            }
            if (frame.payload.method.id == AMQP_BASIC_NACK_METHOD) {
                amqp_basic_nack_t *nack = (amqp_basic_nack_t *)frame.payload.method.decoded;
                fail("the broker nacked message %llu", (unsigned long long)nack->delivery_tag);
            }
            if (frame.payload.method.id != AMQP_BASIC_ACK_METHOD) {
                fail_on_method(&frame, "waiting for confirms");
            }
            amqp_basic_ack_t *ack = (amqp_basic_ack_t *)frame.payload.method.decoded;
            if (ack->delivery_tag < base || ack->delivery_tag >= base + size) {
                fail("confirm for unexpected delivery tag %llu", (unsigned long long)ack->delivery_tag);
            }
            uint64_t first = ack->multiple ? base : ack->delivery_tag;
            for (uint64_t tag = first; tag <= ack->delivery_tag; tag++) {
                if (!settled[tag - base]) {
                    settled[tag - base] = 1;
                    unsettled--;
                }
            }
            amqp_maybe_release_buffers(conn);
        }
    }
    free(settled);
}

/// Consumes `count` deliveries with basic.qos `prefetch`, acking each one individually.
static void consume_all(amqp_connection_state_t conn, amqp_channel_t channel, const options_t *opt,
                        amqp_bytes_t queue) {
    amqp_basic_qos(conn, channel, 0, (uint16_t)opt->prefetch, 0);
    check_reply(amqp_get_rpc_reply(conn), "basic.qos");
    amqp_basic_consume(conn, channel, queue, amqp_empty_bytes, 0, 0, 0, amqp_empty_table);
    check_reply(amqp_get_rpc_reply(conn), "basic.consume");

    long received = 0;
    struct timeval timeout = {.tv_sec = 30, .tv_usec = 0};
    while (received < opt->count) {
        amqp_envelope_t envelope;
        amqp_maybe_release_buffers(conn);
        amqp_rpc_reply_t reply = amqp_consume_message(conn, &envelope, &timeout, 0);
        if (reply.reply_type == AMQP_RESPONSE_NORMAL) {
            if ((long)envelope.message.body.len != opt->size) {
                fail("delivery %llu has %zu bytes, expected %ld", (unsigned long long)envelope.delivery_tag,
                     envelope.message.body.len, opt->size);
            }
            check_status(amqp_basic_ack(conn, channel, envelope.delivery_tag, 0), "basic.ack");
            amqp_destroy_envelope(&envelope);
            received++;
            continue;
        }
        if (reply.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
            reply.library_error == AMQP_STATUS_UNEXPECTED_STATE) {
            // Some other frame came first: read it and decide.
            amqp_frame_t frame;
            check_status(amqp_simple_wait_frame(conn, &frame), "consuming");
            if (frame.frame_type == AMQP_FRAME_METHOD && frame.payload.method.id != AMQP_BASIC_ACK_METHOD) {
                fail_on_method(&frame, "consuming");
            }
            continue;
        }
        if (reply.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION && reply.library_error == AMQP_STATUS_TIMEOUT) {
            fail("consuming: no delivery for 30 s after %ld of %ld messages", received, opt->count);
        }
        check_reply(reply, "consuming");
    }
}

int main(int argc, char **argv) {
    options_t opt = {.url = NULL, .queue = NULL, .cacert = NULL, .count = 0, .size = 1024, .prefetch = 100,
                     .window = 100};
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            usage(NULL);
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "amqp-raw-bench: %s needs a value\n", arg);
            usage(NULL);
        }
        const char *value = argv[++i];
        if (strcmp(arg, "--url") == 0) {
            opt.url = value;
        } else if (strcmp(arg, "--queue") == 0) {
            opt.queue = value;
        } else if (strcmp(arg, "--cacert") == 0) {
            opt.cacert = value;
        } else if (strcmp(arg, "--count") == 0) {
            opt.count = parse_positive("--count", value);
        } else if (strcmp(arg, "--size") == 0) {
            opt.size = parse_positive("--size", value);
        } else if (strcmp(arg, "--prefetch") == 0) {
            opt.prefetch = parse_positive("--prefetch", value);
        } else if (strcmp(arg, "--window") == 0) {
            opt.window = parse_positive("--window", value);
        } else {
            fprintf(stderr, "amqp-raw-bench: unknown option %s\n", arg);
            usage(NULL);
        }
    }
    if (opt.url == NULL) {
        /* The URL holds a password: a caller passes it in the environment, where `ps` does not show it. */
        opt.url = getenv("AMQP_URL");
    }
    if (opt.url == NULL) {
        usage("--url (or AMQP_URL in the environment) is required");
    }
    if (opt.queue == NULL || opt.queue[0] == '\0') {
        usage("--queue is required");
    }
    if (opt.count == 0) {
        usage("--count is required");
    }
    if (opt.prefetch > 65535) {
        usage("--prefetch must be at most 65535");
    }
    if (opt.size > 64L * 1024 * 1024) {
        usage("--size must be at most 64 MiB");
    }

    amqp_connection_state_t conn = open_connection(&opt);
    const amqp_channel_t publish_channel = 1;
    const amqp_channel_t consume_channel = 2;
    open_channel(conn, publish_channel);
    open_channel(conn, consume_channel);

    amqp_bytes_t queue = amqp_cstring_bytes(opt.queue);
    amqp_queue_declare(conn, publish_channel, queue, 0, 1, 0, 0, amqp_empty_table);
    check_reply(amqp_get_rpc_reply(conn), "queue.declare");
    amqp_queue_purge(conn, publish_channel, queue);
    check_reply(amqp_get_rpc_reply(conn), "queue.purge");

    amqp_bytes_t body = amqp_bytes_malloc((size_t)opt.size);
    if (body.bytes == NULL) {
        fail("out of memory");
    }
    memset(body.bytes, 'x', body.len);

    double t0 = now_seconds();
    publish_all(conn, publish_channel, &opt, queue, body);
    double t1 = now_seconds();
    consume_all(conn, consume_channel, &opt, queue);
    double t2 = now_seconds();

    amqp_queue_delete(conn, publish_channel, queue, 0, 0);
    check_reply(amqp_get_rpc_reply(conn), "queue.delete");
    check_reply(amqp_channel_close(conn, consume_channel, AMQP_REPLY_SUCCESS), "channel.close");
    check_reply(amqp_channel_close(conn, publish_channel, AMQP_REPLY_SUCCESS), "channel.close");
    check_reply(amqp_connection_close(conn, AMQP_REPLY_SUCCESS), "connection.close");
    check_status(amqp_destroy_connection(conn), "closing the connection");
    amqp_bytes_free(body);

    double publish_seconds = t1 - t0;
    double consume_seconds = t2 - t1;
    printf("{\"publish_per_sec\": %.1f, \"consume_per_sec\": %.1f, \"count\": %ld, \"size\": %ld, "
           "\"prefetch\": %ld, \"window\": %ld, \"publish_seconds\": %.3f, \"consume_seconds\": %.3f}\n",
           (double)opt.count / publish_seconds, (double)opt.count / consume_seconds, opt.count, opt.size,
           opt.prefetch, opt.window, publish_seconds, consume_seconds);
    return 0;
}
