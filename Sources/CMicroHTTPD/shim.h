#ifndef ACTIONHOOK_CMICROHTTPD_SHIM_H
#define ACTIONHOOK_CMICROHTTPD_SHIM_H

#include <stdarg.h>
#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/select.h>
#include <microhttpd.h>

// MHD_start_daemon is variadic, which Swift cannot call. Every option goes through one
// MHD_OPTION_ARRAY terminated by MHD_OPTION_END.
static inline struct MHD_Daemon *ah_mhd_start_daemon(unsigned int flags, uint16_t port,
                                                     MHD_AccessHandlerCallback handler, void *handler_cls,
                                                     struct MHD_OptionItem *options) {
    return MHD_start_daemon(flags, port, NULL, NULL, handler, handler_cls,
                            MHD_OPTION_ARRAY, options, MHD_OPTION_END);
}

// MHD_get_daemon_info is variadic: the port the daemon is bound to (useful with port 0).
static inline uint16_t ah_mhd_bound_port(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info == NULL ? 0 : info->port;
}

// MHD_get_connection_info is variadic: the peer's socket address, or NULL.
static inline const struct sockaddr *ah_mhd_client_address(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    return info == NULL ? NULL : info->client_addr;
}

// The logger type MHD expects, so Swift can form a value of it.
typedef void (*ah_mhd_logger)(void *cls, const char *fmt, va_list ap);

#endif
