// The C surface of librabbitmq (rabbitmq-c 0.11) as the AMQP module sees it.
//
// Swift cannot call C variadic functions, and it does not import macros that contain casts,
// so this header wraps `amqp_login`/`amqp_login_with_properties` in fixed-argument inline
// functions and re-exports the method ids, property flags and frame types as typed constants.
#ifndef CRABBITMQ_SHIM_H
#define CRABBITMQ_SHIM_H

#include <amqp.h>
#include <amqp_framing.h>
#include <amqp_ssl_socket.h>
#include <amqp_tcp_socket.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/time.h>

// MARK: - Login (the library's versions are variadic)

/// SASL PLAIN login with a client-properties table (merged by the library with its defaults).
static inline amqp_rpc_reply_t crabbitmq_login_plain(amqp_connection_state_t state, const char *vhost,
                                                     int channel_max, int frame_max, int heartbeat,
                                                     const amqp_table_t *properties, const char *user,
                                                     const char *password) {
    return amqp_login_with_properties(state, vhost, channel_max, frame_max, heartbeat, properties,
                                      AMQP_SASL_METHOD_PLAIN, user, password);
}

/// SASL PLAIN login without client properties.
static inline amqp_rpc_reply_t crabbitmq_login_plain_basic(amqp_connection_state_t state, const char *vhost,
                                                           int channel_max, int frame_max, int heartbeat,
                                                           const char *user, const char *password) {
    return amqp_login(state, vhost, channel_max, frame_max, heartbeat, AMQP_SASL_METHOD_PLAIN, user, password);
}

/// SASL EXTERNAL login (identity from the TLS client certificate).
static inline amqp_rpc_reply_t crabbitmq_login_external(amqp_connection_state_t state, const char *vhost,
                                                        int channel_max, int frame_max, int heartbeat,
                                                        const amqp_table_t *properties, const char *identity) {
    return amqp_login_with_properties(state, vhost, channel_max, frame_max, heartbeat, properties,
                                      AMQP_SASL_METHOD_EXTERNAL, identity);
}

// MARK: - Threads

/// Names the calling thread (15 characters at most), for top -H, perf and gdb. pthread_setname_np is a
/// GNU extension that Swift's Glibc module does not declare.
static inline int crabbitmq_set_thread_name(const char *name) {
    extern int pthread_setname_np(pthread_t thread, const char *name);
    return pthread_setname_np(pthread_self(), name);
}

// MARK: - Sockets (ioctl is variadic)

/// Bytes queued in a TCP socket's send queue (written, not yet acknowledged by the peer), or -1.
static inline int crabbitmq_send_queued(int fd) {
    int queued = 0;
    return ioctl(fd, TIOCOUTQ, &queued) == 0 ? queued : -1;
}

// MARK: - Method ids (the macros carry a cast, which Swift does not import)

static const amqp_method_number_t CRABBITMQ_CONNECTION_CLOSE_METHOD = AMQP_CONNECTION_CLOSE_METHOD;
static const amqp_method_number_t CRABBITMQ_CONNECTION_CLOSE_OK_METHOD = AMQP_CONNECTION_CLOSE_OK_METHOD;
static const amqp_method_number_t CRABBITMQ_CONNECTION_BLOCKED_METHOD = AMQP_CONNECTION_BLOCKED_METHOD;
static const amqp_method_number_t CRABBITMQ_CONNECTION_UNBLOCKED_METHOD = AMQP_CONNECTION_UNBLOCKED_METHOD;
static const amqp_method_number_t CRABBITMQ_CHANNEL_CLOSE_METHOD = AMQP_CHANNEL_CLOSE_METHOD;
static const amqp_method_number_t CRABBITMQ_CHANNEL_CLOSE_OK_METHOD = AMQP_CHANNEL_CLOSE_OK_METHOD;
static const amqp_method_number_t CRABBITMQ_CHANNEL_FLOW_METHOD = AMQP_CHANNEL_FLOW_METHOD;
static const amqp_method_number_t CRABBITMQ_BASIC_DELIVER_METHOD = AMQP_BASIC_DELIVER_METHOD;
static const amqp_method_number_t CRABBITMQ_BASIC_RETURN_METHOD = AMQP_BASIC_RETURN_METHOD;
static const amqp_method_number_t CRABBITMQ_BASIC_ACK_METHOD = AMQP_BASIC_ACK_METHOD;
static const amqp_method_number_t CRABBITMQ_BASIC_NACK_METHOD = AMQP_BASIC_NACK_METHOD;
static const amqp_method_number_t CRABBITMQ_BASIC_CANCEL_METHOD = AMQP_BASIC_CANCEL_METHOD;
static const amqp_method_number_t CRABBITMQ_BASIC_CANCEL_OK_METHOD = AMQP_BASIC_CANCEL_OK_METHOD;
static const amqp_method_number_t CRABBITMQ_BASIC_CONSUME_OK_METHOD = AMQP_BASIC_CONSUME_OK_METHOD;
static const amqp_method_number_t CRABBITMQ_BASIC_QOS_OK_METHOD = AMQP_BASIC_QOS_OK_METHOD;

// MARK: - Frame types, basic properties flags, reply codes

static const uint8_t CRABBITMQ_FRAME_METHOD = AMQP_FRAME_METHOD;
static const uint8_t CRABBITMQ_FRAME_HEADER = AMQP_FRAME_HEADER;
static const uint8_t CRABBITMQ_FRAME_BODY = AMQP_FRAME_BODY;
static const uint8_t CRABBITMQ_FRAME_HEARTBEAT = AMQP_FRAME_HEARTBEAT;

static const amqp_flags_t CRABBITMQ_BASIC_CONTENT_TYPE_FLAG = AMQP_BASIC_CONTENT_TYPE_FLAG;
static const amqp_flags_t CRABBITMQ_BASIC_CONTENT_ENCODING_FLAG = AMQP_BASIC_CONTENT_ENCODING_FLAG;
static const amqp_flags_t CRABBITMQ_BASIC_HEADERS_FLAG = AMQP_BASIC_HEADERS_FLAG;
static const amqp_flags_t CRABBITMQ_BASIC_DELIVERY_MODE_FLAG = AMQP_BASIC_DELIVERY_MODE_FLAG;
static const amqp_flags_t CRABBITMQ_BASIC_PRIORITY_FLAG = AMQP_BASIC_PRIORITY_FLAG;
static const amqp_flags_t CRABBITMQ_BASIC_CORRELATION_ID_FLAG = AMQP_BASIC_CORRELATION_ID_FLAG;
static const amqp_flags_t CRABBITMQ_BASIC_REPLY_TO_FLAG = AMQP_BASIC_REPLY_TO_FLAG;
static const amqp_flags_t CRABBITMQ_BASIC_EXPIRATION_FLAG = AMQP_BASIC_EXPIRATION_FLAG;
static const amqp_flags_t CRABBITMQ_BASIC_MESSAGE_ID_FLAG = AMQP_BASIC_MESSAGE_ID_FLAG;
static const amqp_flags_t CRABBITMQ_BASIC_TIMESTAMP_FLAG = AMQP_BASIC_TIMESTAMP_FLAG;
static const amqp_flags_t CRABBITMQ_BASIC_TYPE_FLAG = AMQP_BASIC_TYPE_FLAG;
static const amqp_flags_t CRABBITMQ_BASIC_USER_ID_FLAG = AMQP_BASIC_USER_ID_FLAG;
static const amqp_flags_t CRABBITMQ_BASIC_APP_ID_FLAG = AMQP_BASIC_APP_ID_FLAG;

static const int CRABBITMQ_REPLY_SUCCESS = AMQP_REPLY_SUCCESS;

#endif  // CRABBITMQ_SHIM_H
