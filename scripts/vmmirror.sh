# Sourced by scripts/vmtest and scripts/bench.sh (POSIX sh).
#
# The VM puts its own tmpfs on /tmp, /var/tmp and /run, hiding the host's,
# and an overlay on $HOME, whose inodes the BPF layer's rules would not
# match. vm_mirror NAME copies a checkout in any of them (a CI clone, say) to
# a plain host directory the VM sees as it is, one per checkout (so two
# checkouts never share one), and changes to it; elsewhere it does nothing.
# node_modules come along (about 200 MB, seconds): the compatibility suite's
# client and servers run from them in the VM.
# MCPGUARD_VMTEST_MIRROR names the directory.
vm_mirror() {
	case "$PWD/" in
	/tmp/* | /var/tmp/* | /run/* | "${HOME:-/nonexistent}"/*)
		mirror="${MCPGUARD_VMTEST_MIRROR:-/var/cache/mcpguard/vm-src/$(printf %s "$PWD" | cksum | cut -d' ' -f1)}"
		echo "$1: $PWD is hidden or overlaid inside the VM; mirroring it to $mirror" >&2
		rm -rf "$mirror"
		mkdir -p "$mirror"
		tar --exclude=./.git --exclude=./.cache --exclude=./results -cf - . | tar -xf - -C "$mirror"
		cd "$mirror"
		;;
	esac
}
