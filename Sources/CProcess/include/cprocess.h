#ifndef CPROCESS_H
#define CPROCESS_H

#include <spawn.h>

/// pipe2(fds, O_CLOEXEC): both ends close on exec, atomically, so a child started by another
/// thread at the same moment never inherits them.
int cprocess_pipe_cloexec(int fds[2]);

/// posix_spawn_file_actions_addchdir_np where the C library has it (glibc 2.29+, macOS 10.15+);
/// returns ENOSYS elsewhere.
int cprocess_addchdir(posix_spawn_file_actions_t *actions, const char *path);

/// posix_spawn_file_actions_addclosefrom_np(actions, from) where the C library has it
/// (glibc 2.34+): the child gets only the descriptors below `from`, not whatever this process
/// has open without close-on-exec (sockets, other programs' pipes). Returns ENOSYS elsewhere.
int cprocess_addclosefrom(posix_spawn_file_actions_t *actions, int from);

/// The process's environment, as posix_spawn wants it (`environ` is not visible to Swift on
/// every platform).
char *const *cprocess_environment(void);

/// Opens a new pseudo-terminal: returns the controller's descriptor and writes the device
/// path of the terminal end into `name`; -1 on failure. For tests that drive a program through
/// a real terminal.
int cprocess_open_pty(char *name, unsigned long size);

#endif
