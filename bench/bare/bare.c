/*
 * The ceiling: a bare libmicrohttpd server that answers POST /v1/responses with 202 and a small JSON
 * body, doing no other work. It starts libmicrohttpd exactly as ActionHook's HTTPServer does (epoll
 * with an internal thread pool, suspend/resume allowed, the same connection timeout, limits,
 * per-connection memory and listen backlog), reads the whole body, and answers on the call after the
 * body (the same sequence of access-handler calls ActionHook goes through).
 *
 *   bare [port] [threads]     defaults: 8090, 8 (ActionHook's default ACTIONHOOK_HTTP_THREADS)
 *
 * With BARE_ARRIVALS=FILE it also notes, for each request, when its headers arrived (UNIX microseconds,
 * CLOCK_REALTIME) and its webhook-id header, and writes them to FILE as "id<TAB>micros" lines when it
 * stops: the receiver's side of bench/delivery.sh's reply-to-webhook latency (P10). At most 100,000.
 *
 * Runs until SIGINT or SIGTERM.
 */
#include <microhttpd.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BODY_LIMIT (16 * 1024)

struct request {
    size_t received;
    int overflowed;
};

static const char accepted[] = "{\"status\":\"accepted\"}";

#define ARRIVALS_MAX 100000
struct arrival {
    long long micros;
    char id[64];
};
static struct arrival *arrivals; /* NULL unless BARE_ARRIVALS is set */
static atomic_size_t arrival_count;

static void note_arrival(struct MHD_Connection *connection) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    size_t slot = atomic_fetch_add(&arrival_count, 1);
    if (slot >= ARRIVALS_MAX) return;
    const char *id = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, "webhook-id");
    arrivals[slot].micros = (long long)now.tv_sec * 1000000 + now.tv_nsec / 1000;
    snprintf(arrivals[slot].id, sizeof arrivals[slot].id, "%s", id ? id : "");
}

static void write_arrivals(const char *path) {
    FILE *file = fopen(path, "w");
    if (file == NULL) {
        perror("bare: BARE_ARRIVALS");
        return;
    }
    size_t count = atomic_load(&arrival_count);
    if (count > ARRIVALS_MAX) count = ARRIVALS_MAX;
    for (size_t index = 0; index < count; index++) {
        fprintf(file, "%s\t%lld\n", arrivals[index].id, arrivals[index].micros);
    }
    fclose(file);
}

static enum MHD_Result answer(struct MHD_Connection *connection, unsigned int status, const char *body) {
    struct MHD_Response *response =
        MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
    if (response == NULL) return MHD_NO;
    MHD_add_response_header(response, "Content-Type", "application/json");
    enum MHD_Result result = MHD_queue_response(connection, status, response);
    MHD_destroy_response(response);
    return result;
}

static enum MHD_Result access_handler(void *cls, struct MHD_Connection *connection, const char *url,
                                      const char *method, const char *version, const char *upload_data,
                                      size_t *upload_data_size, void **con_cls) {
    (void)cls;
    (void)version;
    (void)upload_data;
    struct request *request = *con_cls;
    if (request == NULL) {
        /* First call: headers only. */
        if (arrivals != NULL) note_arrival(connection);
        request = calloc(1, sizeof *request);
        if (request == NULL) return MHD_NO;
        *con_cls = request;
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        /* Count the body (a real server would parse it; the ceiling does not). */
        request->received += *upload_data_size;
        if (request->received > BODY_LIMIT) request->overflowed = 1;
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (request->overflowed) return answer(connection, 413, "{\"status\":413}");
    if (strcmp(method, "POST") != 0 || strcmp(url, "/v1/responses") != 0) {
        return answer(connection, 404, "{\"status\":404}");
    }
    return answer(connection, 202, accepted);
}

static void completed(void *cls, struct MHD_Connection *connection, void **con_cls,
                      enum MHD_RequestTerminationCode code) {
    (void)cls;
    (void)connection;
    (void)code;
    free(*con_cls);
    *con_cls = NULL;
}

static volatile sig_atomic_t stopping = 0;
static void on_signal(int signal_number) {
    (void)signal_number;
    stopping = 1;
}

int main(int argc, char **argv) {
    unsigned int port = argc > 1 ? (unsigned int)atoi(argv[1]) : 8090;
    unsigned int threads = argc > 2 ? (unsigned int)atoi(argv[2]) : 8;
    const char *arrivals_path = getenv("BARE_ARRIVALS");
    if (arrivals_path != NULL && (arrivals = calloc(ARRIVALS_MAX, sizeof *arrivals)) == NULL) return 1;
    signal(SIGPIPE, SIG_IGN);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);

    struct MHD_Daemon *daemon = MHD_start_daemon(
        MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG, (uint16_t)port, NULL, NULL,
        access_handler, NULL,
        MHD_OPTION_NOTIFY_COMPLETED, completed, NULL,
        MHD_OPTION_THREAD_POOL_SIZE, threads,
        MHD_OPTION_CONNECTION_TIMEOUT, 10u,
        MHD_OPTION_CONNECTION_LIMIT, 1000u,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(32 * 1024),
        MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024u,
        MHD_OPTION_END);
    if (daemon == NULL) {
        fprintf(stderr, "bare: libmicrohttpd could not start on port %u\n", port);
        return 1;
    }
    fprintf(stderr, "bare: listening on port %u with %u threads\n", port, threads);
    while (!stopping) pause();
    MHD_stop_daemon(daemon);
    if (arrivals != NULL) write_arrivals(arrivals_path);
    return 0;
}
