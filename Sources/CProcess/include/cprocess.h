#ifndef CPROCESS_H
#define CPROCESS_H

#include <spawn.h>
#include <sys/types.h>

/// pipe2(fds, O_CLOEXEC): both ends close on exec, atomically, so a child started by another
/// thread at the same moment never inherits them.
int cprocess_pipe_cloexec(int fds[2]);

/// Starts `file` (searched on this process's PATH when it has no slash) with `argv` and
/// `envp` (NULL: this process's environment), in `directory` (NULL: this process's), with
/// `in`, `out` and `err` as its descriptors 0, 1 and 2 and no other descriptor. The child
/// leads a process group of its own, has every signal at its default action and none blocked.
///
/// On Linux the child is started by one long-lived thread of this process (clone with
/// CLONE_VM | CLONE_VFORK, then exec) and gets PR_SET_PDEATHSIG = SIGKILL between the two: it
/// is killed when this process dies, even by SIGKILL. (The parent-death signal follows the
/// thread that started the child, hence the one thread that never ends.) Elsewhere
/// posix_spawn, without a parent-death signal.
///
/// Returns 0 and the child's pid in `pid`, or an errno value: the exec's (ENOENT, EACCES…),
/// or the working directory's.
int cprocess_spawn(
    const char *file, char *const argv[], char *const envp[], const char *directory, int in, int out, int err, pid_t *pid);

/// Makes this process the keeper of what its children leave behind, once: on Linux it
/// becomes a child subreaper (PR_SET_CHILD_SUBREAPER), so a descendant orphaned by its parent
/// (a `setsid` daemon of a tool or an MCP server) becomes this process's child instead of
/// init's; on every platform, `cprocess_kill_children` runs at exit. For programs, not
/// libraries: a subreaper's adopted orphans stay zombies until it exits.
void cprocess_adopt_orphans(void);

/// Kills every child of this process (SIGKILL; the process group too when the child leads
/// one), waits until each has died, and goes on with the orphans their deaths hand over (a
/// subreaper's), for at most about a second. Returns how many children were alive at first.
int cprocess_kill_children(void);

/// When process `pid` started, in a unit of the platform's (Linux: clock ticks after boot,
/// /proc/<pid>/stat field 22; macOS: microseconds after the epoch); 0 when there is no such
/// process. A zombie (ended, not yet reaped) has one. With the pid, it tells a process from a
/// later one given the same pid.
unsigned long long cprocess_start_time(pid_t pid);

/// Whether process `pid` exists and has not ended (a zombie has ended).
int cprocess_is_running(pid_t pid);

/// A running process of process group `group` that started at or after `since` (the group's
/// leader's start time: an older process is not of that group's making), or 0.
pid_t cprocess_group_member(pid_t group, unsigned long long since);

/// The process's environment, as posix_spawn wants it (`environ` is not visible to Swift on
/// every platform).
char *const *cprocess_environment(void);

/// A descriptor that becomes readable (POLLIN) once process `pid`, a child of this process not
/// yet reaped, has ended (Linux's pidfd_open, close-on-exec); -1 where there is none (another
/// platform, a kernel before 5.3, out of descriptors). Waiting on it in `poll` beside a pipe
/// tells the child's end from the pipe's, which a process the child started may hold open.
int cprocess_pidfd_open(pid_t pid);

/// Opens a new pseudo-terminal: returns the controller's descriptor and writes the device
/// path of the terminal end into `name`; -1 on failure. For tests that drive a program through
/// a real terminal.
int cprocess_open_pty(char *name, unsigned long size);

#endif
