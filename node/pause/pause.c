/*
 * kubeling's pause: the first process of every pod sandbox.
 *
 * It holds the pod's network and IPC namespaces open while app containers come and go, reaps the
 * zombies that pod-wide PID sharing (shareProcessNamespace) leaves to PID 1, and exits 0 as soon as
 * it is asked to stop, so `docker stop` on a sandbox never has to wait for SIGKILL. The behaviour
 * follows upstream's build/pause/linux/pause.c; this is an independent implementation.
 *
 * Built statically by node/build.rs and copied into a FROM-scratch image, so it cannot rely on a
 * shell, a dynamic loader or any file in the image besides itself.
 *
 * kubeling addition: `--route CIDR GATEWAY` first adds that route in the pod's network namespace (the
 * Service range through kubeling's gateway container; the sandbox gets CAP_NET_ADMIN for it, app
 * containers do not). A failure is reported and the pod keeps running without Service routing.
 */
#include "route.h"

#include <errno.h>
#include <stdio.h>
#include <signal.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef PAUSE_VERSION
#define PAUSE_VERSION "3.10-kubeling"
#endif

/* Only async-signal-safe calls (write, waitpid, _exit) may run inside the handlers. */
static void say(int fd, const char *text) {
    size_t left = strlen(text);
    while (left > 0) {
        ssize_t n = write(fd, text, left);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return;
        }
        text += n;
        left -= (size_t)n;
    }
}

static void on_shutdown(int signo) {
    char msg[] = "pause: shutting down, got signal 00\n";
    /* Two digits cover every standard Linux signal number (1..31) and the real-time ones (..64). */
    msg[sizeof msg - 4] = (char)('0' + (signo / 10) % 10);
    msg[sizeof msg - 3] = (char)('0' + signo % 10);
    say(STDERR_FILENO, msg);
    _exit(0);
}

static void on_child(int signo) {
    (void)signo;
    int saved = errno;
    /* One SIGCHLD may stand for many exits, so reap until nothing is left. */
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
    errno = saved;
}

static int install(int signo, void (*handler)(int), int flags) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sa.sa_flags = flags;
    sigemptyset(&sa.sa_mask);
    return sigaction(signo, &sa, NULL);
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-v") == 0 || strcmp(argv[i], "--version") == 0) {
            say(STDOUT_FILENO, "pause " PAUSE_VERSION "\n");
            return 0;
        }
        if (strcmp(argv[i], "--route") == 0 && i + 2 < argc) {
            struct in_addr dst, gw;
            int prefix = 0;
            if (parse_cidr(argv[i + 1], &dst, &prefix) < 0 || inet_pton(AF_INET, argv[i + 2], &gw) != 1) {
                say(STDERR_FILENO, "pause: --route wants CIDR GATEWAY\n");
                return 2;
            }
            int err = add_route(dst, prefix, &gw);
            if (err < 0) {
                char msg[160];
                snprintf(msg, sizeof msg, "pause: cannot add the route %s via %s: %s\n", argv[i + 1], argv[i + 2],
                         strerror(-err));
                say(STDERR_FILENO, msg);
            }
            i += 2;
            continue;
        }
        say(STDERR_FILENO, "pause: unknown argument (only -v and --route CIDR GATEWAY are understood)\n");
        return 2;
    }

    if (getpid() != 1)
        say(STDERR_FILENO, "pause: warning: not running as PID 1, zombies of other processes are not mine\n");

    if (install(SIGINT, on_shutdown, 0) < 0 || install(SIGTERM, on_shutdown, 0) < 0 ||
        install(SIGCHLD, on_child, SA_NOCLDSTOP | SA_RESTART) < 0) {
        say(STDERR_FILENO, "pause: cannot install signal handlers\n");
        return 1;
    }

    for (;;)
        pause();

    /* pause() only returns after a handler ran; getting here means the loop itself broke. */
    say(STDERR_FILENO, "pause: the wait loop ended unexpectedly\n");
    return 42;
}
