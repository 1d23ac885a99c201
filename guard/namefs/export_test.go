//go:build linux

package namefs

// MountWithoutPassthrough mounts as Mount does but never offers the kernel
// a backing file: every read and write comes to the server, as on kernels
// before 6.9 or over a stacked file system.
func MountWithoutPassthrough(dir string, o Options) (*Server, error) { return mount(dir, o, false) }
