//go:build !unix

package changes

// openNonblock: no FIFO to fear where there is no O_NONBLOCK.
const openNonblock = 0
