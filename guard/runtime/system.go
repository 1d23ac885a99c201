package runtime

// System lists what every server may read, under both L3 backends alike,
// besides what Resolve finds for its command: the system's code trees
// (libraries, programs, interpreters' standard libraries) and the few
// files below /etc that programs read to run at all (the loader's cache,
// name service, time zone, TLS roots, MIME types, locale aliases, the
// user and group names getpwuid returns). The rest of /etc (shadow, ssh
// host keys, sudoers) is not included. /proc, /sys and device nodes are
// left to each backend, which grants them at different grains.
//
// One list, so that a server that runs under Landlock also runs under
// the BPF backend (an /etc file only one of them granted was such a
// difference: /etc/passwd under BPF, /etc/locale.alias under Landlock).
func System() []string {
	return []string{
		"/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/opt",
		"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/ld.so.preload",
		"/etc/localtime", "/etc/timezone", "/etc/locale.alias",
		"/etc/nsswitch.conf", "/etc/host.conf", "/etc/hosts", "/etc/resolv.conf", "/etc/gai.conf",
		"/etc/protocols", "/etc/services", "/etc/passwd", "/etc/group",
		"/etc/ssl", "/etc/ca-certificates", "/etc/pki", "/etc/mime.types",
		"/etc/alternatives", "/etc/python3", "/etc/python3.11", "/etc/os-release",
	}
}
