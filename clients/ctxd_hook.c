/* ctxd_hook.c: the native hook client, the same client as ctxd_hook.py without an interpreter.

       ctxd-hook AGENT [EVENT]
       ctxd-hook claude statusline --wrap COMMAND

   It does exactly what ctxd_hook.py does, and prints exactly what it prints, for every agent,
   event and failure: it frames stdin unparsed (ctxd_wire.hook_request), sends it over the Unix
   socket (ctxd_wire.socket_path), prints the result of an ok answer verbatim, starts
   `ctxd serve --spawned` when nothing listens, and exits 0 always. The Python client is the
   reference: each function here names the one it mirrors, and tests/clients/test_hook_client.py
   runs one suite against both. Its point is cost: an agent runs a hook on every tool call, and
   an interpreter's start-up is most of what the Python client costs (docs/benchmarks.md).

   `ctxd install` compiles it (hookcmd/nativeclient.py) into the per-user client directory, next
   to ctxd_hook.py and the `ctxd-command` file it reads to start ctxd. Plain C99 + POSIX. */

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <pwd.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* Linux first; the rest of POSIX (macOS) through these. */
#ifdef __APPLE__
#define st_mtim st_mtimespec
#endif
#ifndef SOCK_CLOEXEC
#define SOCK_CLOEXEC 0
#define SOCK_NONBLOCK 0
#define NO_SOCK_FLAGS 1
#endif

static int open_socket(int nonblocking) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0), 0);
#ifdef NO_SOCK_FLAGS
    if (fd >= 0) {
        fcntl(fd, F_SETFD, FD_CLOEXEC);
        if (nonblocking) fcntl(fd, F_SETFL, O_NONBLOCK);
    }
#endif
    return fd;
}

static int cloexec_pipe(int fds[2]) {
#ifdef __linux__
    return pipe2(fds, O_CLOEXEC);
#else
    if (pipe(fds) != 0) return -1;
    fcntl(fds[0], F_SETFD, FD_CLOEXEC);
    fcntl(fds[1], F_SETFD, FD_CLOEXEC);
    return 0;
#endif
}

/* ctxd_wire's constants. */
#define MAX_PAYLOAD (8u * 1024 * 1024)
#define MAX_RESPONSE (1024u * 1024)
#define MAX_ENV_VALUE 1024
#define OK_HEADER "{\"v\":1,\"ok\":true}"
/* ctxd_hook's. */
#define DEFAULT_TIMEOUT 2.0
#define STDIN_WAIT 5.0
#define WRAP_TIMEOUT 0.3
#define SPAWN_BACKOFF 5.0
#define SPAWN_WAIT 2.0
#define SPAWN_POLL_NS 10000000L
#define MAX_COMMAND_FILE 65536
#define USAGE \
    "usage: ctxd-hook AGENT [EVENT]" \
    "   (AGENT: claude, gemini, codex, qwen, opencode, pi, copilot, cline, kilo, kimi)\n"

/* ctxd_wire.HOOK_ENV and ctxd_hook.USAGE, written out (tests/clients/test_native_client.py
   holds them equal). */
static const char *const HOOK_ENV[] = {
    "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE",
    "CLAUDE_CODE_MAX_OUTPUT_TOKENS",
    "CLAUDE_CODE_AUTO_COMPACT_WINDOW",
    "DISABLE_AUTO_COMPACT",
    "DISABLE_COMPACT",
    "CLAUDE_CODE_IDLE_COMPACT_MIN_TOKENS",
    "CLAUDE_CONFIG_DIR",
    "CODEX_HOME",
    "COPILOT_HOME",
    "PI_CODING_AGENT_DIR",
    "CLINE_DIR",
    "CLINE_DATA_DIR",
    "CLINE_SESSION_DATA_DIR",
    "KIMI_CODE_HOME",
    "KIMI_MODEL_NAME",
    "KIMI_MODEL_MAX_CONTEXT_SIZE",
};
#define N_HOOK_ENV (sizeof HOOK_ENV / sizeof HOOK_ENV[0])

/* A growable byte buffer; running out of memory ends the hook silently (exit 0). */
typedef struct {
    char *data;
    size_t len, cap;
} buf_t;

static void buf_add(buf_t *b, const void *data, size_t len) {
    if (len == 0) return; /* memcpy to a buffer not allocated yet, even of nothing, is undefined */
    if (b->data == NULL || b->len + len > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + len) cap *= 2;
        char *grown = realloc(b->data, cap);
        if (grown == NULL) _exit(0);
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, data, len);
    b->len += len;
}

static void buf_str(buf_t *b, const char *text) { buf_add(b, text, strlen(text)); }

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* `_is_word`: agent and event go into the JSON header unescaped. (Python's isalnum also takes
   non-ASCII letters; such a name is no agent's, and the daemon refuses it either way.) */
static int is_word(const char *text) {
    size_t len = strlen(text), alnum = 0;
    if (len == 0 || len > 64) return 0;
    for (const char *c = text; *c; c++) {
        if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9'))
            alnum++;
        else if (*c != '_' && *c != '-')
            return 0;
    }
    return alnum > 0;
}

/* ---------------------------------------------------------------- stdin, bounded in time */

static sigjmp_buf stdin_timeout;

static void on_alarm(int signum) {
    (void)signum;
    siglongjmp(stdin_timeout, 1);
}

static void set_timer(double seconds) {
    struct itimerval timer = {{0, 0}, {(time_t)seconds, (suseconds_t)((seconds - (time_t)seconds) * 1e6)}};
    setitimer(ITIMER_REAL, &timer, NULL);
}

/* `read_stdin`: up to limit + 1 bytes (one more tells an oversize payload). Returns 0, or -1
   when stdin did not end within STDIN_WAIT or could not be read: the payload is then dropped. */
static int read_stdin(buf_t *out, size_t limit) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_alarm;
    sigemptyset(&action.sa_mask);
    sigaction(SIGALRM, &action, NULL);
    /* Allocated whole before the timer starts (untouched pages cost nothing), so that the
       jump out of `read` never leaves an allocation half done. */
    out->data = malloc(limit + 1);
    if (out->data == NULL) _exit(0);
    out->cap = limit + 1;
    out->len = 0;
    if (sigsetjmp(stdin_timeout, 1)) return -1; /* the timer fired while stdin was open */
    set_timer(STDIN_WAIT);
    int failed = 0;
    while (out->len <= limit) {
        size_t want = limit + 1 - out->len;
        if (want > (1u << 20)) want = 1u << 20;
        ssize_t got = read(0, out->data + out->len, want);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            failed = 1;
            break;
        }
        if (got == 0) break;
        out->len += (size_t)got;
    }
    set_timer(0);
    return failed ? -1 : 0;
}

/* ---------------------------------------------------------------- the wire */

/* `ctxd_wire.environ().get`: a variable, "" counting as unset where Python's `or` would. */
static const char *env_or_null(const char *name) {
    const char *value = getenv(name);
    return value && *value ? value : NULL;
}

/* `ctxd_wire.runtime_dir`. */
static void runtime_dir(buf_t *out) {
    const char *socket_override = env_or_null("CTXD_SOCKET");
    if (socket_override) {
        const char *slash = strrchr(socket_override, '/');
        if (slash == NULL || slash == socket_override)
            buf_str(out, ".");
        else
            buf_add(out, socket_override, (size_t)(slash - socket_override));
    } else if (env_or_null("XDG_RUNTIME_DIR")) {
        buf_str(out, getenv("XDG_RUNTIME_DIR"));
        buf_str(out, "/ctxd");
    } else {
        if (env_or_null("XDG_STATE_HOME")) {
            buf_str(out, getenv("XDG_STATE_HOME"));
        } else {
            const char *home = env_or_null("HOME");
            if (home) {
                buf_str(out, home);
            } else { /* os.path.expanduser("~") */
                struct passwd *pw = getpwuid(getuid());
                const char *dir = pw ? pw->pw_dir : "~";
                size_t len = strlen(dir);
                while (len && dir[len - 1] == '/') len--;
                if (len)
                    buf_add(out, dir, len);
                else
                    buf_str(out, "/");
            }
            buf_str(out, "/.local/state");
        }
        buf_str(out, "/ctxd/run");
    }
    buf_add(out, "", 1);
    out->len--;
}

/* `ctxd_wire.socket_path`: a NUL-terminated path in `out`. */
static void socket_path(buf_t *out) {
    const char *socket_override = env_or_null("CTXD_SOCKET");
    if (socket_override) {
        buf_str(out, socket_override);
    } else {
        runtime_dir(out);
        buf_str(out, "/ctxd.sock");
    }
    buf_add(out, "", 1);
    out->len--;
}

/* `ctxd_wire.hook_env`: the HOOK_ENV variables that need no escaping, as a JSON object. */
static void hook_env(buf_t *out) {
    int first = 1;
    buf_str(out, "{");
    for (size_t i = 0; i < N_HOOK_ENV; i++) {
        const char *value = getenv(HOOK_ENV[i]);
        if (value == NULL || strlen(value) > MAX_ENV_VALUE) continue;
        int safe = 1;
        for (const unsigned char *c = (const unsigned char *)value; *c; c++)
            if (*c < 32 || *c >= 127 || *c == '"' || *c == '\\') safe = 0;
        if (!safe) continue;
        if (!first) buf_str(out, ",");
        first = 0;
        buf_str(out, "\"");
        buf_str(out, HOOK_ENV[i]);
        buf_str(out, "\":\"");
        buf_str(out, value);
        buf_str(out, "\"");
    }
    buf_str(out, "}");
}

/* `ctxd_wire.hook_request` without its payload: the 4-byte length and the header line. */
static void hook_head(buf_t *out, const char *agent, const char *event, size_t payload_len) {
    buf_t head = {0};
    buf_str(&head, "{\"v\":1,\"op\":\"hook\",\"agent\":\"");
    buf_str(&head, agent);
    buf_str(&head, "\",\"event\":");
    if (event) {
        buf_str(&head, "\"");
        buf_str(&head, event);
        buf_str(&head, "\"");
    } else {
        buf_str(&head, "null");
    }
    buf_str(&head, ",\"env\":");
    hook_env(&head);
    buf_str(&head, "}\n");
    uint32_t size = (uint32_t)(head.len + payload_len);
    unsigned char prefix[4] = {(unsigned char)(size >> 24), (unsigned char)(size >> 16),
                               (unsigned char)(size >> 8), (unsigned char)size};
    buf_add(out, prefix, 4);
    buf_add(out, head.data, head.len);
    free(head.data);
}

/* Wait until `fd` is ready for `events`, at most `timeout` s: 0 ready, -1 timed out (a
   socket with a timeout in Python waits per operation, as here). */
static int wait_fd(int fd, short events, double timeout) {
    struct pollfd pfd = {fd, events, 0};
    double deadline = now() + timeout;
    for (;;) {
        double left = deadline - now();
        double wait_ms = left <= 0 ? 0 : left * 1000.0 + 0.999;
        int ms = wait_ms > 2e9 ? 2000000000 : (int)wait_ms; /* a timeout of years: as long */
        int ready = poll(&pfd, 1, ms);
        if (ready > 0) return 0;
        if (ready == 0) return -1;
        if (errno != EINTR) return -1;
    }
}

static int peer_uid_ok(int fd) {
#ifdef SO_PEERCRED
    struct ucred creds;
    socklen_t len = sizeof creds;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &creds, &len) != 0) return -1;
    return creds.uid == getuid();
#else
    uid_t uid;
    gid_t gid;
    if (getpeereid(fd, &uid, &gid) != 0) return -1;
    return uid == getuid();
#endif
}

static int send_all(int fd, const char *data, size_t len, double timeout) {
    while (len) {
        ssize_t sent = send(fd, data, len, 0);
        if (sent < 0) {
            if (errno == EINTR) continue;
            if ((errno == EAGAIN || errno == EWOULDBLOCK) && wait_fd(fd, POLLOUT, timeout) == 0)
                continue;
            return -1;
        }
        data += sent;
        len -= (size_t)sent;
    }
    return 0;
}

static int recv_exactly(int fd, char *into, size_t len, double timeout) {
    while (len) {
        ssize_t got = recv(fd, into, len, 0);
        if (got < 0) {
            if (errno == EINTR) continue;
            if ((errno == EAGAIN || errno == EWOULDBLOCK) && wait_fd(fd, POLLIN, timeout) == 0)
                continue;
            return -1;
        }
        if (got == 0) return -1; /* closed before the answer was complete: ConnectionError */
        into += got;
        len -= (size_t)got;
    }
    return 0;
}

/* The outcomes of `exchange`, as the Python client's: an answer (maybe nothing to print), or
   an OSError (nothing listens, a timeout, a broken connection: the caller may start ctxd). */
enum { ANSWERED = 0, OS_ERROR = -1 };

/* `exchange`: send one request; `*out` gets the bytes to print (none when the daemon did not
   answer well: an error answer, garbage, an answer over the limit, a peer of another uid). */
static int exchange(const char *path, const buf_t *head, const buf_t *payload, double timeout,
                    buf_t *out) {
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    size_t path_len = strlen(path);
    if (path_len > sizeof addr.sun_path) return OS_ERROR; /* "AF_UNIX path too long" */
    memcpy(addr.sun_path, path, path_len);
    int fd = open_socket(1);
    if (fd < 0) return OS_ERROR;
    int result = OS_ERROR;
    socklen_t addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + path_len);
    if (connect(fd, (struct sockaddr *)&addr, addr_len) != 0) {
        int error = 0;
        socklen_t error_len = sizeof error;
        if (errno != EINPROGRESS || wait_fd(fd, POLLOUT, timeout) != 0 ||
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &error_len) != 0 || error != 0)
            goto done;
    }
    int ours = peer_uid_ok(fd);
    if (ours < 0) goto done;
    if (!ours) { /* not our daemon, whatever the path says: nothing it says is printed */
        result = ANSWERED;
        goto done;
    }
    if (send_all(fd, head->data, head->len, timeout) != 0) goto done;
    if (payload->len && send_all(fd, payload->data, payload->len, timeout) != 0) goto done;
    unsigned char prefix[4];
    if (recv_exactly(fd, (char *)prefix, 4, timeout) != 0) goto done;
    size_t size = ((size_t)prefix[0] << 24) | ((size_t)prefix[1] << 16) |
                  ((size_t)prefix[2] << 8) | prefix[3];
    if (size > MAX_RESPONSE) { /* FrameTooLarge: a ValueError, answered with nothing */
        result = ANSWERED;
        goto done;
    }
    char *body = malloc(size ? size : 1);
    if (body == NULL) _exit(0);
    if (recv_exactly(fd, body, size, timeout) != 0) {
        free(body);
        goto done;
    }
    result = ANSWERED;
    /* `ok_result`: the header line must be exactly the ok header. */
    size_t ok_len = sizeof OK_HEADER - 1;
    if (size > ok_len && memcmp(body, OK_HEADER, ok_len) == 0 && body[ok_len] == '\n')
        buf_add(out, body + ok_len + 1, size - ok_len - 1);
    free(body);
done:
    close(fd);
    return result;
}

static int listening(const char *path) {
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    size_t path_len = strlen(path);
    if (path_len > sizeof addr.sun_path) return 0;
    memcpy(addr.sun_path, path, path_len);
    int fd = open_socket(0);
    if (fd < 0) return 0;
    socklen_t addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + path_len);
    int ok = connect(fd, (struct sockaddr *)&addr, addr_len) == 0;
    close(fd);
    return ok;
}

/* ---------------------------------------------------------------- starting ctxd */

static char *self_dir; /* the directory of this executable, where `ctxd-command` lies */

/* `serve_argv`: the words of `ctxd-command` beside this client (or, when the program they name
   cannot run, the first `ctxd` on PATH), then `serve --spawned`; NULL when ctxd is not found. */
static char **serve_argv(void) {
    static char *words[64];
    size_t n = 0;
    buf_t content = {0};
    if (self_dir) {
        buf_t file = {0};
        buf_str(&file, self_dir);
        buf_str(&file, "/ctxd-command");
        buf_add(&file, "", 1);
        int fd = open(file.data, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        free(file.data);
        if (fd >= 0) {
            struct stat info;
            if (fstat(fd, &info) == 0 && S_ISREG(info.st_mode)) {
                char chunk[4096];
                ssize_t got;
                while (content.len < MAX_COMMAND_FILE &&
                       (got = read(fd, chunk, sizeof chunk)) > 0)
                    buf_add(&content, chunk, (size_t)got);
            }
            close(fd);
        }
    }
    buf_add(&content, "", 1);
    for (char *line = content.data; line && n < 61;) {
        char *end = memchr(line, '\n', strlen(line));
        if (end) *end = '\0';
        if (*line) words[n++] = line;
        line = end ? end + 1 : NULL;
    }
    if (n == 0 || access(words[0], X_OK) != 0) {
        const char *path = getenv("PATH");
        if (path == NULL) path = "/bin:/usr/bin"; /* os.defpath */
        static buf_t found;
        n = 0;
        for (const char *dir = path;; dir++) {
            const char *end = strchr(dir, ':');
            size_t len = end ? (size_t)(end - dir) : strlen(dir);
            found.len = 0;
            if (len)
                buf_add(&found, dir, len);
            else
                buf_str(&found, ".");
            buf_str(&found, "/ctxd");
            buf_add(&found, "", 1);
            if (access(found.data, X_OK) == 0) {
                words[n++] = found.data;
                break;
            }
            if (!end) break;
            dir = end;
        }
        if (n == 0) return NULL;
    }
    words[n++] = "serve";
    words[n++] = "--spawned";
    words[n] = NULL;
    return words;
}

/* `spawn_daemon`: start `ctxd serve --spawned` detached, at most once per SPAWN_BACKOFF
   across concurrent hooks; its pid, or 0 when this call started nothing. */
static pid_t spawn_daemon(void) {
    buf_t dir = {0};
    runtime_dir(&dir);
    mode_t old_umask = umask(077); /* every level we create is private, not just the last */
    for (size_t i = 1; i <= dir.len; i++) { /* os.makedirs(run_dir, 0o700, exist_ok=True) */
        if (i < dir.len && dir.data[i] != '/') continue;
        char saved = dir.data[i];
        dir.data[i] = '\0';
        int made = mkdir(dir.data, 0700) == 0 || errno == EEXIST;
        dir.data[i] = saved;
        if (!made && i == dir.len) {
            umask(old_umask);
            return 0;
        }
    }
    umask(old_umask);
    struct stat info;
    if (lstat(dir.data, &info) != 0 || !S_ISDIR(info.st_mode) || info.st_uid != getuid() ||
        (info.st_mode & 077))
        return 0; /* not a private dir of ours: the daemon would refuse it; write nothing there */
    buf_str(&dir, "/spawn.lock");
    buf_add(&dir, "", 1);
    int fd = open(dir.data, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
    free(dir.data);
    if (fd < 0) return 0;
    pid_t pid = 0;
    if (fstat(fd, &info) != 0 || info.st_nlink != 1 || info.st_uid != getuid() ||
        !S_ISREG(info.st_mode))
        goto done; /* a hard link or something else planted there: not ours to write to */
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) goto done; /* another hook is spawning right now */
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    double age = (double)(wall.tv_sec - info.st_mtim.tv_sec) +
                 (double)(wall.tv_nsec - info.st_mtim.tv_nsec) / 1e9;
    if (age < SPAWN_BACKOFF && info.st_size) goto done; /* spawned moments ago */
    if (ftruncate(fd, 0) != 0) goto done;
    char line[32];
    int len = snprintf(line, sizeof line, "%d\n", (int)getpid());
    if (write(fd, line, (size_t)len) != len) goto done;
    char **argv = serve_argv();
    if (argv == NULL) goto done; /* ctxd is gone from where it was and not on PATH */
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
    if (posix_spawn(&pid, argv[0], &actions, &attr, argv, environ) != 0) pid = 0;
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&actions);
done:
    close(fd);
    return pid;
}

/* `answer_once_up`: wait (SPAWN_WAIT at most) until the daemon this hook started listens, then
   send the request once: a request that timed out may still be answered, and a second copy
   would count its event twice. */
static void answer_once_up(const char *path, const buf_t *head, const buf_t *payload, pid_t pid,
                           buf_t *out) {
    double deadline = now() + SPAWN_WAIT;
    int exited = 0;
    while (!listening(path)) {
        if (exited || now() >= deadline) return;
        int status;
        pid_t done = waitpid(pid, &status, WNOHANG);
        exited = done != 0; /* ChildProcessError (-1) counts as exited too */
        if (!exited) {
            struct timespec pause = {0, SPAWN_POLL_NS};
            nanosleep(&pause, NULL);
        }
    }
    exchange(path, head, payload, DEFAULT_TIMEOUT, out);
}

/* ---------------------------------------------------------------- a wrapped statusline */

/* `wrapped`: the user's own statusline COMMAND gets the payload on stdin and writes straight
   to Claude Code (same bytes, same exit code); the payload goes to the daemon as well, bounded
   by WRAP_TIMEOUT. Returns the command's exit code (127 when no shell could run it). */
static int wrapped(const char *command, const char *agent) {
    buf_t payload = {0};
    if (read_stdin(&payload, MAX_PAYLOAD) != 0) payload.len = 0;
    int pipe_fds[2];
    if (cloexec_pipe(pipe_fds) != 0) return 127;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[0], 0);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t defaults;
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGPIPE);
    sigaddset(&defaults, SIGXFSZ);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
    pid_t pid = 0;
    int started = 0;
    static const char *const shells[] = {"bash", "sh"};
    for (int i = 0; i < 2 && !started; i++) {
        char *argv[] = {(char *)shells[i], "-c", (char *)command, NULL};
        started = posix_spawnp(&pid, shells[i], &actions, &attr, argv, environ) == 0;
    }
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&actions);
    close(pipe_fds[0]);
    if (!started) {
        close(pipe_fds[1]);
        return 127;
    }
    for (size_t sent = 0; sent < payload.len;) { /* a command that stops reading: its choice */
        ssize_t n = write(pipe_fds[1], payload.data + sent, payload.len - sent);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        sent += (size_t)n;
    }
    close(pipe_fds[1]);
    if (payload.len <= MAX_PAYLOAD) {
        buf_t path = {0}, head = {0}, ignored = {0};
        socket_path(&path);
        hook_head(&head, agent, "statusline", payload.len);
        if (exchange(path.data, &head, &payload, WRAP_TIMEOUT, &ignored) == OS_ERROR) {
            const char *no_spawn = getenv("CTXD_NO_SPAWN");
            if (no_spawn == NULL || strcmp(no_spawn, "1") != 0) spawn_daemon();
        }
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return 0;
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return 0;
}

/* ---------------------------------------------------------------- main */

static void locate_self(const char *argv0) {
    const char *slash = strrchr(argv0, '/');
    if (slash) {
        size_t len = slash == argv0 ? 1 : (size_t)(slash - argv0);
        self_dir = strndup(argv0, len);
        return;
    }
#ifdef __linux__ /* run by name from PATH: where the kernel found it */
    static char exe[4096];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = '\0';
        char *last = strrchr(exe, '/');
        if (last) {
            *last = '\0';
            self_dir = exe;
        }
    }
#endif
}

/* `CTXD_HOOK_TIMEOUT` as Python's float() reads it; -1 for a value that would raise. */
static double hook_timeout(void) {
    const char *text = env_or_null("CTXD_HOOK_TIMEOUT");
    if (text == NULL) return DEFAULT_TIMEOUT;
    if (strpbrk(text, "xXpP")) return -1; /* hexadecimal: strtod reads it, float() does not */
    char *end;
    errno = 0;
    double value = strtod(text, &end);
    while (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r') end++;
    if (end == text || *end || errno || !isfinite(value) || value < 0) return -1;
    return value;
}

int main(int argc, char **argv) {
    /* As Python: a closed pipe is an error to handle (EPIPE), never a death by signal. */
    signal(SIGPIPE, SIG_IGN);
    locate_self(argv[0] ? argv[0] : "");
    if (argc == 5 && strcmp(argv[2], "statusline") == 0 && strcmp(argv[3], "--wrap") == 0)
        return wrapped(argv[4], is_word(argv[1]) ? argv[1] : "claude");
    const char *agent = argc > 1 ? argv[1] : "";
    const char *event = argc > 2 ? argv[2] : NULL;
    if (!is_word(agent) || (event && !is_word(event))) {
        ssize_t ignored = write(2, USAGE, sizeof USAGE - 1);
        (void)ignored;
        return 0;
    }
    buf_t payload = {0};
    if (read_stdin(&payload, MAX_PAYLOAD) != 0 || payload.len > MAX_PAYLOAD) return 0;
    double timeout = hook_timeout();
    if (timeout < 0) return 0;
    buf_t path = {0}, head = {0}, out = {0};
    socket_path(&path);
    hook_head(&head, agent, event, payload.len);
    if (exchange(path.data, &head, &payload, timeout, &out) == OS_ERROR) {
        const char *no_spawn = getenv("CTXD_NO_SPAWN");
        if (no_spawn && strcmp(no_spawn, "1") == 0) return 0;
        pid_t pid = spawn_daemon();
        if (pid == 0) return 0;
        answer_once_up(path.data, &head, &payload, pid, &out);
    }
    for (size_t written = 0; written < out.len;) {
        ssize_t n = write(1, out.data + written, out.len - written);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        written += (size_t)n;
    }
    return 0;
}
