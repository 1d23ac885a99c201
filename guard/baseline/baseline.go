// Package baseline lists the system files every guarded server may read,
// under both L3 backends alike, besides what the runtime resolver finds
// for its command. It sits below guard/runtime and the Landlock ruleset so
// that both can share it (and the resolver can start its helpers through
// the launcher, which links the ruleset).
package baseline

// System lists what every server may read: the system's code trees
// (programs, libraries, interpreters' standard libraries), the parts of
// /usr/share that runtimes read (time zones, TLS roots, MIME and magic
// databases, locales, terminfo, node's and Debian's JavaScript, Perl and
// Python trees, git's templates, fonts), and, below /etc, single files and
// the few directories that hold only public data (the loader's cache and
// configuration, name service, time zone, TLS roots and openssl.cnf, MIME
// types, locale aliases, the user and group names getpwuid returns, the
// alternatives symlinks, Python's sitecustomize).
//
// File by file where a directory holds secrets: /etc/ssl/certs and
// /etc/ssl/openssl.cnf, never /etc/ssl (its private/ holds TLS keys), the
// same for /etc/pki; nothing of /opt (vendors keep licences and keys
// there; a server installed there has its own directory granted by the
// resolver), no shadow files, no SSH host keys, nothing of /etc beyond
// this list. TestSystemWorldReadable walks every tree listed here and
// fails on any entry that is not world-readable.
//
// /proc, /sys and device nodes are left to each backend, which grants them
// at different grains. One list, so that a server that runs under Landlock
// also runs under the BPF backend.
func System() []string {
	return []string{
		"/usr/bin", "/usr/sbin", "/usr/lib", "/usr/lib32", "/usr/lib64", "/usr/libx32", "/usr/libexec",
		"/usr/local/bin", "/usr/local/lib", "/usr/local/lib64", "/usr/local/share/ca-certificates",
		"/usr/share/ca-certificates", "/usr/share/zoneinfo", "/usr/share/mime", "/usr/share/misc", "/usr/share/file",
		"/usr/share/locale", "/usr/share/i18n", "/usr/share/terminfo", "/usr/share/tabset",
		"/usr/share/nodejs", "/usr/share/javascript", "/usr/share/perl", "/usr/share/perl5",
		"/usr/share/python3", "/usr/share/python-wheels", "/usr/share/java", "/usr/share/git-core",
		"/usr/share/icu", "/usr/share/fonts", "/usr/share/fontconfig", "/usr/share/X11", "/usr/share/xml",
		"/usr/share/publicsuffix", "/usr/share/iso-codes", "/usr/share/glib-2.0",
		"/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin",
		"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/ld.so.preload",
		"/etc/localtime", "/etc/timezone", "/etc/locale.alias",
		"/etc/nsswitch.conf", "/etc/host.conf", "/etc/hosts", "/etc/resolv.conf", "/etc/gai.conf",
		"/etc/protocols", "/etc/services", "/etc/passwd", "/etc/group",
		"/etc/ssl/certs", "/etc/ssl/openssl.cnf", "/etc/ssl/cert.pem",
		"/etc/pki/tls/certs", "/etc/pki/tls/openssl.cnf", "/etc/pki/ca-trust/extracted",
		"/etc/mime.types", "/etc/alternatives", "/etc/python3", "/etc/python3.11", "/etc/os-release",
	}
}
