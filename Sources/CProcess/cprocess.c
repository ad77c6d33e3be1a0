#define _GNU_SOURCE
#include "cprocess.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__linux__)
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#ifndef __NR_close_range
#define __NR_close_range 436
#endif
#endif

#if defined(__APPLE__)
#include <crt_externs.h>
#include <libproc.h>
#include <sys/proc_info.h>
char *const *cprocess_environment(void) { return *_NSGetEnviron(); }
#else
extern char **environ;
char *const *cprocess_environment(void) { return environ; }
#endif

int cprocess_pipe_cloexec(int fds[2]) {
#if defined(__linux__)
    return pipe2(fds, O_CLOEXEC);
#else
    if (pipe(fds) != 0) return -1;
    fcntl(fds[0], F_SETFD, FD_CLOEXEC);
    fcntl(fds[1], F_SETFD, FD_CLOEXEC);
    return 0;
#endif
}

// MARK: - Starting a process

struct spawn_request {
    const char *file;
    char *const *argv;
    char *const *envp;
    const char *directory;
    int fds[3];
    /// Linux: the paths to try exec on, in PATH order (built before the child exists: the child
    /// may not allocate).
    char **candidates;
    /// Linux: the pid of this process, for the child to check that it still has its parent.
    pid_t parent;
    /// Linux: the highest descriptor to close when close_range is missing.
    int max_fd;
    /// Linux: set by the child (its memory is ours until it execs) when it cannot exec.
    int error;
};

/// posix_spawn(p), the way every platform has it: a group of its own, default signals, no mask,
/// descriptors 0-2 only (as far as the C library can say so).
static int spawn_posix(struct spawn_request *r, pid_t *pid) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    for (int i = 0; i < 3; i++) posix_spawn_file_actions_adddup2(&actions, r->fds[i], i);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
    posix_spawn_file_actions_addclosefrom_np(&actions, 3);
#endif
    if (r->directory != NULL) {
#if defined(__APPLE__) || (defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 29)))
        int status = posix_spawn_file_actions_addchdir_np(&actions, r->directory);
#else
        int status = ENOSYS;
#endif
        if (status != 0) {
            posix_spawn_file_actions_destroy(&actions);
            return status;
        }
    }
    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    posix_spawnattr_setpgroup(&attributes, 0);
    sigset_t all, none;
    sigfillset(&all);
    sigdelset(&all, SIGKILL);
    sigdelset(&all, SIGSTOP);
    sigemptyset(&none);
    posix_spawnattr_setsigdefault(&attributes, &all);
    posix_spawnattr_setsigmask(&attributes, &none);
    short flags = POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK;
#if defined(__APPLE__)
    // Only the descriptors the file actions name reach the child.
    flags |= POSIX_SPAWN_CLOEXEC_DEFAULT;
#endif
    posix_spawnattr_setflags(&attributes, flags);
    int status = posix_spawnp(pid, r->file, &actions, &attributes, r->argv, r->envp);
    posix_spawnattr_destroy(&attributes);
    posix_spawn_file_actions_destroy(&actions);
    return status;
}

#if defined(__linux__)

/// The child, between clone and exec. It shares our memory (CLONE_VM) while this thread waits
/// (CLONE_VFORK), and other threads of ours run on: it makes system calls only, touches
/// nothing but `r` and its own stack, and never allocates.
static int spawn_child(void *argument) {
    struct spawn_request *r = argument;
    // The handlers are ours (in memory we share): none may run here. The starting thread
    // blocked every signal; each goes back to its default before any is unblocked, ignored
    // ones too (a child of a process that ignores SIGTERM must not ignore it).
    // The kernel's call, not the C library's: that one refuses the signals it keeps for
    // itself (32 and 33), which an ignoring process would otherwise hand on ignored. All zero
    // is SIG_DFL, no flags, an empty mask, whatever the architecture's layout.
    unsigned long defaults[4] = {0, 0, 0, 0};
    for (int number = 1; number < NSIG; number++) {
        if (number != SIGKILL && number != SIGSTOP) syscall(SYS_rt_sigaction, number, defaults, NULL, (size_t)8);
    }
    if (setpgid(0, 0) != 0) goto failed;
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) goto failed;
    // Our process may have died before the signal was set: then nothing will send it.
    if (getppid() != r->parent) _exit(127);
    int fds[3] = {r->fds[0], r->fds[1], r->fds[2]};
    // A descriptor below 3 would be overwritten by the dup2 of another one first.
    for (int i = 0; i < 3; i++) {
        if (fds[i] < 3 && (fds[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 3)) < 0) goto failed;
    }
    for (int i = 0; i < 3; i++) {
        if (dup2(fds[i], i) < 0) goto failed;
    }
    if (syscall(__NR_close_range, 3U, ~0U, 0U) != 0) {
        for (int fd = 3; fd <= r->max_fd; fd++) close(fd);
    }
    if (r->directory != NULL && chdir(r->directory) != 0) goto failed;
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    // As execvp: the first candidate that execs; EACCES on any wins over not found.
    int error = ENOENT;
    for (char **candidate = r->candidates; *candidate != NULL; candidate++) {
        execve(*candidate, r->argv, r->envp);
        if (errno == EACCES) {
            error = EACCES;
        } else if (errno != ENOENT && errno != ENOTDIR && errno != ESTALE && errno != ENODEV && errno != ETIMEDOUT) {
            error = errno;
            break;
        }
    }
    r->error = error;
    _exit(127);
failed:
    r->error = errno;
    _exit(127);
}

/// Where exec looks for `file`: itself when it has a slash, else each PATH entry's (this
/// process's PATH, as posix_spawnp; an empty entry is the working directory). NULL-terminated;
/// NULL when out of memory.
static char **candidates_for(const char *file) {
    if (strchr(file, '/') != NULL) {
        char **list = calloc(2, sizeof(char *));
        if (list == NULL || (list[0] = strdup(file)) == NULL) {
            free(list);
            return NULL;
        }
        return list;
    }
    const char *path = getenv("PATH");
    if (path == NULL) path = "/bin:/usr/bin";
    size_t entries = 1;
    for (const char *c = path; *c; c++) entries += *c == ':';
    char **list = calloc(entries + 1, sizeof(char *));
    if (list == NULL) return NULL;
    size_t count = 0;
    const char *start = path;
    for (;;) {
        const char *end = strchr(start, ':');
        size_t length = end ? (size_t)(end - start) : strlen(start);
        char *candidate = malloc(length + strlen(file) + 2);
        if (candidate == NULL) break;
        if (length == 0) {
            strcpy(candidate, file);
        } else {
            memcpy(candidate, start, length);
            candidate[length] = '/';
            strcpy(candidate + length + 1, file);
        }
        list[count++] = candidate;
        if (end == NULL) break;
        start = end + 1;
    }
    return list;
}

static void free_candidates(char **list) {
    if (list == NULL) return;
    for (char **candidate = list; *candidate != NULL; candidate++) free(*candidate);
    free(list);
}

enum { child_stack_size = 64 * 1024 };

/// Starts the child from the calling thread (the spawner thread, or any thread when it could
/// not be made), with every signal blocked around the clone.
static int spawn_linux(struct spawn_request *r, pid_t *pid) {
    r->candidates = candidates_for(r->file);
    if (r->candidates == NULL) return ENOMEM;
    r->parent = getpid();
    r->error = 0;
    struct rlimit limit;
    r->max_fd = getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < 65536
                    ? (int)limit.rlim_cur - 1
                    : 65535;
    void *stack = mmap(NULL, child_stack_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED) {
        free_candidates(r->candidates);
        return errno;
    }
    sigset_t all, previous;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &previous);
    int child = clone(spawn_child, (char *)stack + child_stack_size, CLONE_VM | CLONE_VFORK | SIGCHLD, r);
    int clone_error = errno;
    pthread_sigmask(SIG_SETMASK, &previous, NULL);
    munmap(stack, child_stack_size);
    free_candidates(r->candidates);
    r->candidates = NULL;
    if (child < 0) {
        // A sandbox that forbids clone's flags: start it the portable way, without the signal.
        if (clone_error == EPERM || clone_error == ENOSYS || clone_error == EINVAL) return spawn_posix(r, pid);
        return clone_error;
    }
    if (r->error != 0) {
        int status;
        while (waitpid(child, &status, 0) < 0 && errno == EINTR) {}
        return r->error;
    }
    *pid = child;
    return 0;
}

// The spawner thread: the parent-death signal is sent when the *thread* that started a child
// ends, and the threads that ask (the cooperative pool's, a tool's own) come and go. One
// thread that lives as long as the process starts every child.

struct spawn_job {
    struct spawn_request *request;
    pid_t pid;
    int status;
    int done;
    struct spawn_job *next;
};

static pthread_mutex_t spawner_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t spawner_wake = PTHREAD_COND_INITIALIZER;
static pthread_cond_t spawner_done = PTHREAD_COND_INITIALIZER;
static struct spawn_job *spawner_queue;
static struct spawn_job *spawner_queue_tail;
static pthread_once_t spawner_once = PTHREAD_ONCE_INIT;
static int spawner_running;

static void *spawner_main(void *unused) {
    (void)unused;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, NULL);
    for (;;) {
        pthread_mutex_lock(&spawner_lock);
        while (spawner_queue == NULL) pthread_cond_wait(&spawner_wake, &spawner_lock);
        struct spawn_job *job = spawner_queue;
        spawner_queue = job->next;
        if (spawner_queue == NULL) spawner_queue_tail = NULL;
        pthread_mutex_unlock(&spawner_lock);
        int status = spawn_linux(job->request, &job->pid);
        pthread_mutex_lock(&spawner_lock);
        job->status = status;
        job->done = 1;
        pthread_cond_broadcast(&spawner_done);
        pthread_mutex_unlock(&spawner_lock);
    }
    return NULL;
}

static void start_spawner(void) {
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attributes, 256 * 1024);
    pthread_t thread;
    spawner_running = pthread_create(&thread, &attributes, spawner_main, NULL) == 0;
    pthread_attr_destroy(&attributes);
}

#endif

int cprocess_spawn(
    const char *file, char *const argv[], char *const envp[], const char *directory, int in, int out, int err, pid_t *pid) {
    struct spawn_request request = {
        .file = file,
        .argv = argv,
        .envp = envp != NULL ? envp : cprocess_environment(),
        .directory = directory,
        .fds = {in, out, err},
    };
#if defined(__linux__)
    pthread_once(&spawner_once, start_spawner);
    if (!spawner_running) return spawn_linux(&request, pid);
    struct spawn_job job = {.request = &request};
    pthread_mutex_lock(&spawner_lock);
    if (spawner_queue_tail != NULL) {
        spawner_queue_tail->next = &job;
    } else {
        spawner_queue = &job;
    }
    spawner_queue_tail = &job;
    pthread_cond_signal(&spawner_wake);
    while (!job.done) pthread_cond_wait(&spawner_done, &spawner_lock);
    pthread_mutex_unlock(&spawner_lock);
    if (job.status == 0) *pid = job.pid;
    return job.status;
#else
    return spawn_posix(&request, pid);
#endif
}

// MARK: - What a process left behind

#if defined(__linux__)
/// The fields of /proc/<pid>/stat that matter here; 0 when the process is gone.
struct proc_stat {
    char state;
    pid_t ppid;
    pid_t group;
    int threads;
    unsigned long long start;
};

static int read_stat(pid_t pid, struct proc_stat *stat) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char text[1024];
    ssize_t count = read(fd, text, sizeof text - 1);
    close(fd);
    if (count <= 0) return 0;
    text[count] = 0;
    // The command name may hold anything, ")" too: the fields start after the last ")".
    char *fields = strrchr(text, ')');
    if (fields == NULL) return 0;
    // " S ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime
    // cstime priority nice num_threads itrealvalue starttime"
    int ppid, group, threads;
    unsigned long long start;
    if (sscanf(fields + 1, " %c %d %d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %d %*d %llu", &stat->state, &ppid,
               &group, &threads, &start) != 5) {
        return 0;
    }
    stat->ppid = ppid;
    stat->group = group;
    stat->threads = threads;
    stat->start = start;
    return 1;
}

static int is_dead(char state) { return state == 'Z' || state == 'X' || state == 'x'; }

/// Calls `visit` with every process of the system; stops when it returns nonzero.
static void each_process(int (*visit)(pid_t, const struct proc_stat *, void *), void *context) {
    DIR *directory = opendir("/proc");
    if (directory == NULL) return;
    struct dirent *entry;
    while ((entry = readdir(directory)) != NULL) {
        char *end;
        long pid = strtol(entry->d_name, &end, 10);
        if (*end != 0 || pid <= 0) continue;
        struct proc_stat stat;
        if (read_stat((pid_t)pid, &stat) && visit((pid_t)pid, &stat, context)) break;
    }
    closedir(directory);
}

struct sweep {
    pid_t self;
    pid_t own_group;
    int alive;
};

/// Whether a child shown dead (a zombie) is still dying: its main thread has ended but others
/// have not. Its own children are handed on only when the last thread ends, so until then
/// they still name it as their parent, and the sweep must look again.
static int is_dying(const struct proc_stat *stat) { return is_dead(stat->state) && stat->threads > 1; }

static int kill_if_child(pid_t pid, const struct proc_stat *stat, void *context) {
    struct sweep *sweep = context;
    if (stat->ppid != sweep->self || (is_dead(stat->state) && !is_dying(stat))) return 0;
    sweep->alive++;
    if (stat->group == pid && pid != sweep->own_group) kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
    return 0;
}

struct member_search {
    pid_t group;
    unsigned long long since;
    pid_t found;
};

static int find_member(pid_t pid, const struct proc_stat *stat, void *context) {
    struct member_search *search = context;
    if (stat->group != search->group || is_dead(stat->state) || stat->start < search->since) return 0;
    search->found = pid;
    return 1;
}
#endif

#if defined(__APPLE__)
static int bsd_info(pid_t pid, struct proc_bsdinfo *info) {
    return proc_pidinfo(pid, PROC_PIDTBSDINFO, 0, info, sizeof *info) == (int)sizeof *info;
}
#endif

int cprocess_kill_children(void) {
    int first = -1;
#if defined(__linux__)
    struct sweep sweep = {.self = getpid(), .own_group = getpgrp()};
    // A child's death hands its orphans to a subreaper: the next round finds them.
    for (int round = 0; round < 500; round++) {
        sweep.alive = 0;
        each_process(kill_if_child, &sweep);
        if (first < 0) first = sweep.alive;
        if (sweep.alive == 0) break;
        usleep(2000);
    }
#elif defined(__APPLE__)
    pid_t own_group = getpgrp();
    for (int round = 0; round < 500; round++) {
        pid_t children[4096];
        int count = proc_listchildpids(getpid(), children, sizeof children);
        int alive = 0;
        for (int i = 0; i < count; i++) {
            struct proc_bsdinfo info;
            if (!bsd_info(children[i], &info) || info.pbi_status == SZOMB) continue;
            alive++;
            if ((pid_t)info.pbi_pgid == children[i] && children[i] != own_group) kill(-children[i], SIGKILL);
            kill(children[i], SIGKILL);
        }
        if (first < 0) first = alive;
        if (alive == 0) break;
        usleep(2000);
    }
#endif
    return first < 0 ? 0 : first;
}

static void kill_children_at_exit(void) { cprocess_kill_children(); }

static pthread_once_t adopt_once = PTHREAD_ONCE_INIT;

static void adopt(void) {
#if defined(__linux__)
    prctl(PR_SET_CHILD_SUBREAPER, 1);
#endif
    atexit(kill_children_at_exit);
}

void cprocess_adopt_orphans(void) { pthread_once(&adopt_once, adopt); }

unsigned long long cprocess_start_time(pid_t pid) {
#if defined(__linux__)
    struct proc_stat stat;
    return read_stat(pid, &stat) ? stat.start : 0;
#elif defined(__APPLE__)
    struct proc_bsdinfo info;
    if (!bsd_info(pid, &info)) return 0;
    return (unsigned long long)info.pbi_start_tvsec * 1000000ULL + info.pbi_start_tvusec;
#else
    return 0;
#endif
}

int cprocess_is_running(pid_t pid) {
#if defined(__linux__)
    struct proc_stat stat;
    return read_stat(pid, &stat) && !is_dead(stat.state);
#elif defined(__APPLE__)
    struct proc_bsdinfo info;
    return bsd_info(pid, &info) && info.pbi_status != SZOMB;
#else
    return kill(pid, 0) == 0;
#endif
}

pid_t cprocess_group_member(pid_t group, unsigned long long since) {
#if defined(__linux__)
    struct member_search search = {.group = group, .since = since};
    each_process(find_member, &search);
    return search.found;
#elif defined(__APPLE__)
    pid_t members[4096];
    int count = proc_listpgrppids(group, members, sizeof members);
    for (int i = 0; i < count; i++) {
        if (cprocess_is_running(members[i]) && cprocess_start_time(members[i]) >= since) return members[i];
    }
    return 0;
#else
    return 0;
#endif
}

int cprocess_pidfd_open(pid_t pid) {
#if defined(__linux__)
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
    // pidfd_open's descriptors are close-on-exec always.
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    (void)pid;
    return -1;
#endif
}

int cprocess_open_pty(char *name, unsigned long size) {
    int controller = posix_openpt(O_RDWR | O_NOCTTY);
    if (controller < 0) return -1;
    if (grantpt(controller) != 0 || unlockpt(controller) != 0) {
        close(controller);
        return -1;
    }
    const char *path = ptsname(controller);
    if (path == NULL || strlen(path) + 1 > size) {
        close(controller);
        return -1;
    }
    strcpy(name, path);
    return controller;
}
