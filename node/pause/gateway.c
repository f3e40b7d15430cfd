/*
 * kubeling's service gateway: the one container on a cluster's Docker network that owns the whole Service
 * range. Pods route the range to it (see pause's --route); a local route (`local CIDR dev lo`) makes every
 * Service IP its own address, so it can listen on any ClusterIP:port without one address per Service.
 *
 * It makes no proxy decision. The node agent connects to its control port (on the gateway's own IP) and
 * sends lines:
 *   A AGENT_IP TCP_PORT UDP_PORT   where the agent's proxy listens (on the network's host side)
 *   B                              a new listener set begins
 *   T IP PORT / U IP PORT          one TCP / UDP Service port to listen on
 *   .                              the set is complete: listeners not in it are closed
 * Each accepted TCP connection is relayed (a forked child) to the agent's TCP port after a PROXY protocol v1
 * header naming the client and the Service address. Each UDP datagram goes to the agent's UDP port with a
 * 12-byte header (client IPv4, client port, Service IPv4, Service port, network order); replies from the agent
 * carry the same header and leave from the Service address's socket. Listeners survive a lost control
 * connection (a restarting agent), so the set stays until the agent sends a new one.
 *
 * Built statically by node/build.rs and copied into a FROM-scratch image, like pause.
 *   usage: gateway SERVICE_CIDR CONTROL_IP CONTROL_PORT
 */
#define _GNU_SOURCE
#include "route.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#define MAX_LISTENERS 4096
#define CTL_BUF 65536
#define UDP_HEADER 12

struct listener {
    int fd;
    char proto; /* 'T' or 'U' */
    struct in_addr ip;
    uint16_t port; /* host order */
    int keep;
};

static struct listener listeners[MAX_LISTENERS];
static int n_listeners;
static struct sockaddr_in agent_tcp, agent_udp;
static int have_agent;
static int ctl_listen = -1, ctl_conn = -1, udp_out = -1;
static char ctl_buf[CTL_BUF];
static size_t ctl_len;

static void on_term(int signo) {
    (void)signo;
    _exit(0);
}

static void log_line(const char *fmt, const char *a, unsigned b, const char *c) {
    char msg[256];
    snprintf(msg, sizeof msg, fmt, a, b, c);
    ssize_t ignored = write(STDERR_FILENO, msg, strlen(msg));
    (void)ignored;
}

static int open_listener(char proto, struct in_addr ip, uint16_t port) {
    int fd = socket(AF_INET, (proto == 'T' ? SOCK_STREAM : SOCK_DGRAM) | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr = ip;
    a.sin_port = htons(port);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || (proto == 'T' && listen(fd, 512) < 0)) {
        int err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    return fd;
}

static void set_entry(char proto, const char *ip_text, const char *port_text) {
    struct in_addr ip;
    long port = strtol(port_text, NULL, 10);
    if (inet_pton(AF_INET, ip_text, &ip) != 1 || port <= 0 || port > 65535)
        return;
    for (int i = 0; i < n_listeners; i++) {
        if (listeners[i].proto == proto && listeners[i].ip.s_addr == ip.s_addr && listeners[i].port == port) {
            listeners[i].keep = 1;
            return;
        }
    }
    if (n_listeners == MAX_LISTENERS)
        return;
    int fd = open_listener(proto, ip, (uint16_t)port);
    if (fd < 0) {
        log_line("gateway: cannot listen on %s:%u: %s\n", ip_text, (unsigned)port, strerror(errno));
        return;
    }
    listeners[n_listeners++] = (struct listener){fd, proto, ip, (uint16_t)port, 1};
}

static void finish_set(void) {
    int kept = 0;
    for (int i = 0; i < n_listeners; i++) {
        if (listeners[i].keep)
            listeners[kept++] = listeners[i];
        else
            close(listeners[i].fd);
    }
    n_listeners = kept;
}

static void control_line(char *line) {
    char *words[5] = {0};
    int n = 0;
    for (char *tok = strtok(line, " "); tok != NULL && n < 5; tok = strtok(NULL, " "))
        words[n++] = tok;
    if (n == 0)
        return;
    if (strcmp(words[0], "A") == 0 && n == 4) {
        memset(&agent_tcp, 0, sizeof agent_tcp);
        agent_tcp.sin_family = AF_INET;
        if (inet_pton(AF_INET, words[1], &agent_tcp.sin_addr) != 1)
            return;
        agent_udp = agent_tcp;
        agent_tcp.sin_port = htons((uint16_t)strtol(words[2], NULL, 10));
        agent_udp.sin_port = htons((uint16_t)strtol(words[3], NULL, 10));
        have_agent = 1;
    } else if (strcmp(words[0], "B") == 0) {
        for (int i = 0; i < n_listeners; i++)
            listeners[i].keep = 0;
    } else if ((strcmp(words[0], "T") == 0 || strcmp(words[0], "U") == 0) && n == 3) {
        set_entry(words[0][0], words[1], words[2]);
    } else if (strcmp(words[0], ".") == 0) {
        finish_set();
        ssize_t ignored = write(ctl_conn, "ok\n", 3);
        (void)ignored;
    }
}

static void read_control(void) {
    ssize_t got = read(ctl_conn, ctl_buf + ctl_len, sizeof ctl_buf - ctl_len - 1);
    if (got <= 0) {
        close(ctl_conn);
        ctl_conn = -1;
        ctl_len = 0;
        return;
    }
    ctl_len += (size_t)got;
    char *start = ctl_buf;
    char *nl;
    while ((nl = memchr(start, '\n', ctl_len - (size_t)(start - ctl_buf))) != NULL) {
        *nl = '\0';
        control_line(start);
        start = nl + 1;
    }
    ctl_len -= (size_t)(start - ctl_buf);
    memmove(ctl_buf, start, ctl_len);
    if (ctl_len == sizeof ctl_buf - 1)
        ctl_len = 0; /* a line longer than the buffer: drop it */
}

static int write_all(int fd, const char *p, size_t len) {
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* The child's whole life: connect to the agent, send the PROXY header, copy both ways with half-close. */
static void relay(int client) {
    struct sockaddr_in src, dst;
    socklen_t sl = sizeof src, dl = sizeof dst;
    if (getpeername(client, (struct sockaddr *)&src, &sl) < 0 || getsockname(client, (struct sockaddr *)&dst, &dl) < 0)
        _exit(1);
    int up = socket(AF_INET, SOCK_STREAM, 0);
    if (up < 0 || connect(up, (struct sockaddr *)&agent_tcp, sizeof agent_tcp) < 0)
        _exit(1);
    char s[INET_ADDRSTRLEN], d[INET_ADDRSTRLEN], header[128];
    inet_ntop(AF_INET, &src.sin_addr, s, sizeof s);
    inet_ntop(AF_INET, &dst.sin_addr, d, sizeof d);
    int hl = snprintf(header, sizeof header, "PROXY TCP4 %s %s %u %u\r\n", s, d, ntohs(src.sin_port), ntohs(dst.sin_port));
    if (write_all(up, header, (size_t)hl) < 0)
        _exit(1);
    int fds[2] = {client, up};
    int open_dir[2] = {1, 1}; /* 0: client->up, 1: up->client */
    char buf[65536];
    while (open_dir[0] || open_dir[1]) {
        struct pollfd p[2];
        int np = 0, which[2];
        for (int d2 = 0; d2 < 2; d2++) {
            if (open_dir[d2]) {
                p[np].fd = fds[d2];
                p[np].events = POLLIN;
                p[np].revents = 0;
                which[np++] = d2;
            }
        }
        if (poll(p, (nfds_t)np, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        for (int i = 0; i < np; i++) {
            if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            int d2 = which[i];
            ssize_t n = read(fds[d2], buf, sizeof buf);
            if (n <= 0) {
                if (n < 0 && errno == EINTR)
                    continue;
                shutdown(fds[1 - d2], SHUT_WR);
                open_dir[d2] = 0;
                if (n < 0)
                    open_dir[1 - d2] = 0;
            } else if (write_all(fds[1 - d2], buf, (size_t)n) < 0) {
                open_dir[0] = open_dir[1] = 0;
            }
        }
    }
    _exit(0);
}

static void accept_tcp(int lfd) {
    int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (c < 0)
        return;
    if (!have_agent) {
        close(c);
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        /* The child holds no listener: a closed Service port must stop listening at once. */
        for (int i = 0; i < n_listeners; i++)
            close(listeners[i].fd);
        close(ctl_listen);
        if (ctl_conn >= 0)
            close(ctl_conn);
        close(udp_out);
        relay(c);
    }
    close(c);
}

static void udp_from_client(struct listener *l) {
    char buf[65536];
    struct sockaddr_in from;
    socklen_t fl = sizeof from;
    ssize_t n = recvfrom(l->fd, buf + UDP_HEADER, sizeof buf - UDP_HEADER, 0, (struct sockaddr *)&from, &fl);
    if (n < 0 || !have_agent)
        return;
    uint16_t vport = htons(l->port);
    memcpy(buf, &from.sin_addr, 4);
    memcpy(buf + 4, &from.sin_port, 2);
    memcpy(buf + 6, &l->ip, 4);
    memcpy(buf + 10, &vport, 2);
    sendto(udp_out, buf, (size_t)n + UDP_HEADER, 0, (struct sockaddr *)&agent_udp, sizeof agent_udp);
}

static void udp_from_agent(void) {
    char buf[65536];
    struct sockaddr_in from;
    socklen_t fl = sizeof from;
    ssize_t n = recvfrom(udp_out, buf, sizeof buf, 0, (struct sockaddr *)&from, &fl);
    if (n < UDP_HEADER || !have_agent || from.sin_addr.s_addr != agent_udp.sin_addr.s_addr)
        return;
    struct sockaddr_in client;
    memset(&client, 0, sizeof client);
    client.sin_family = AF_INET;
    memcpy(&client.sin_addr, buf, 4);
    memcpy(&client.sin_port, buf + 4, 2);
    struct in_addr vip;
    uint16_t vport;
    memcpy(&vip, buf + 6, 4);
    memcpy(&vport, buf + 10, 2);
    for (int i = 0; i < n_listeners; i++) {
        if (listeners[i].proto == 'U' && listeners[i].ip.s_addr == vip.s_addr && listeners[i].port == ntohs(vport)) {
            sendto(listeners[i].fd, buf + UDP_HEADER, (size_t)n - UDP_HEADER, 0, (struct sockaddr *)&client, sizeof client);
            return;
        }
    }
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: gateway SERVICE_CIDR CONTROL_IP CONTROL_PORT\n");
        return 2;
    }
    struct in_addr range, ctl_ip;
    int prefix = 0;
    if (parse_cidr(argv[1], &range, &prefix) < 0 || inet_pton(AF_INET, argv[2], &ctl_ip) != 1) {
        fprintf(stderr, "gateway: bad arguments\n");
        return 2;
    }
    int err = add_route(range, prefix, NULL);
    if (err < 0) {
        fprintf(stderr, "gateway: cannot add the local route %s: %s\n", argv[1], strerror(-err));
        return 1;
    }
    signal(SIGCHLD, SIG_IGN); /* children are reaped by the kernel */
    signal(SIGPIPE, SIG_IGN);
    signal(SIGTERM, on_term);
    signal(SIGINT, on_term);

    ctl_listen = open_listener('T', ctl_ip, (uint16_t)strtol(argv[3], NULL, 10));
    udp_out = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (ctl_listen < 0 || udp_out < 0) {
        fprintf(stderr, "gateway: cannot open the control port %s:%s: %s\n", argv[2], argv[3], strerror(errno));
        return 1;
    }
    fprintf(stderr, "gateway: owning %s, control on %s:%s\n", argv[1], argv[2], argv[3]);

    static struct pollfd p[MAX_LISTENERS + 3];
    for (;;) {
        int np = 0;
        p[np++] = (struct pollfd){ctl_listen, POLLIN, 0};
        p[np++] = (struct pollfd){udp_out, POLLIN, 0};
        int ctl_at = -1;
        if (ctl_conn >= 0) {
            ctl_at = np;
            p[np++] = (struct pollfd){ctl_conn, POLLIN, 0};
        }
        int first = np;
        int count = n_listeners;
        for (int i = 0; i < count; i++)
            p[np++] = (struct pollfd){listeners[i].fd, POLLIN, 0};
        if (poll(p, (nfds_t)np, -1) < 0) {
            if (errno == EINTR)
                continue;
            return 1;
        }
        if (p[0].revents & POLLIN) {
            int c = accept4(ctl_listen, NULL, NULL, SOCK_CLOEXEC);
            if (c >= 0) {
                if (ctl_conn >= 0)
                    close(ctl_conn);
                ctl_conn = c;
                ctl_len = 0;
                continue; /* the pollfd set is stale now */
            }
        }
        if (p[1].revents & POLLIN)
            udp_from_agent();
        /* Listener events first: the control line may close and reorder listeners. */
        for (int i = 0; i < count; i++) {
            if (!(p[first + i].revents & POLLIN))
                continue;
            if (listeners[i].proto == 'T')
                accept_tcp(listeners[i].fd);
            else
                udp_from_client(&listeners[i]);
        }
        if (ctl_at >= 0 && (p[ctl_at].revents & (POLLIN | POLLHUP | POLLERR)))
            read_control();
    }
}
