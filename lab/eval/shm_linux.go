package eval

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// holdShm puts text in a new System V shared-memory segment (0600) and
// returns its id; the segment stays until removeShm.
func holdShm(text []byte) (int, error) {
	id, err := unix.SysvShmGet(unix.IPC_PRIVATE, len(text)+1, unix.IPC_CREAT|unix.IPC_EXCL|0o600)
	if err != nil {
		return -1, fmt.Errorf("shmget: %w", err)
	}
	mem, err := unix.SysvShmAttach(id, 0, 0)
	if err != nil {
		removeShm(id)
		return -1, fmt.Errorf("shmat: %w", err)
	}
	copy(mem, text)
	return id, unix.SysvShmDetach(mem)
}

func removeShm(id int) error {
	if _, err := unix.SysvShmCtl(id, unix.IPC_RMID, nil); err != nil {
		return fmt.Errorf("remove shared memory %d: %w", id, err)
	}
	return nil
}
