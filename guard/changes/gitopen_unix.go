//go:build unix

package changes

import "syscall"

// openNonblock opens a FIFO put where a file was expected without waiting
// for a writer (the guard must not hang on what a server left in .git).
const openNonblock = syscall.O_NONBLOCK
