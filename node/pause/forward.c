/*
 * kubeling's port-forward helper: `forward PORT`, exec'd inside a pod's sandbox (so inside the pod's
 * network namespace), connects to localhost:PORT (127.0.0.1, then ::1, as containerd's port-forward
 * does) and relays stdin to the connection and the connection to stdout.
 *
 * Protocol with the node agent: after the connect, one line on stderr: "connected" on success, else the
 * error (exit 1). Then stdin EOF half-closes the connection (shutdown SHUT_WR); the connection's EOF or an
 * error ends the helper (exit 0). Static, like pause, so it runs in a FROM scratch sandbox.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int dial(int family, const char *addr, int port, char *err, size_t errlen) {
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errlen, "socket: %s", strerror(errno));
        return -1;
    }
    int rc;
    if (family == AF_INET) {
        struct sockaddr_in sa;
        memset(&sa, 0, sizeof sa);
        sa.sin_family = AF_INET;
        sa.sin_port = htons((unsigned short)port);
        inet_pton(AF_INET, addr, &sa.sin_addr);
        rc = connect(fd, (struct sockaddr *)&sa, sizeof sa);
    } else {
        struct sockaddr_in6 sa;
        memset(&sa, 0, sizeof sa);
        sa.sin6_family = AF_INET6;
        sa.sin6_port = htons((unsigned short)port);
        inet_pton(AF_INET6, addr, &sa.sin6_addr);
        rc = connect(fd, (struct sockaddr *)&sa, sizeof sa);
    }
    if (rc < 0) {
        /* Go's wording, which the kubelet's messages carry. */
        snprintf(err, errlen, "dial tcp %s: connect: %s", addr,
                 errno == ECONNREFUSED ? "connection refused" : strerror(errno));
        close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static int write_all(int fd, const char *buf, ssize_t n) {
    while (n > 0) {
        ssize_t w = write(fd, buf, (size_t)n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        buf += w;
        n -= w;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: forward PORT\n");
        return 2;
    }
    int port = atoi(argv[1]);
    if (port <= 0 || port > 65535) {
        fprintf(stderr, "invalid port %s\n", argv[1]);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    char err4[160], err6[160];
    int fd = dial(AF_INET, "127.0.0.1", port, err4, sizeof err4);
    if (fd < 0) fd = dial(AF_INET6, "::1", port, err6, sizeof err6);
    if (fd < 0) {
        fprintf(stderr, "failed to connect to localhost:%d inside the pod's network namespace, IPv4: %s IPv6: %s\n",
                port, err4, err6);
        return 1;
    }
    fprintf(stderr, "connected\n");
    fflush(stderr);

    static char buf[64 * 1024];
    struct pollfd fds[2] = {{.fd = 0, .events = POLLIN}, {.fd = fd, .events = POLLIN}};
    for (;;) {
        int nfds = poll(fds, 2, -1);
        if (nfds < 0) {
            if (errno == EINTR) continue;
            return 1;
        }
        if (fds[0].fd >= 0 && (fds[0].revents & (POLLIN | POLLHUP | POLLERR))) {
            ssize_t n = read(0, buf, sizeof buf);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                shutdown(fd, SHUT_WR);
                fds[0].fd = -1; /* poll ignores negative descriptors */
            } else if (write_all(fd, buf, n) < 0) {
                return 0;
            }
        }
        if (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t n = read(fd, buf, sizeof buf);
            if (n < 0 && errno == EINTR) continue;
            /* A reset after the connect is an ordinary end (kubectl ends its session on error text). */
            if (n <= 0) return 0;
            if (write_all(1, buf, n) < 0) return 0;
        }
    }
}
