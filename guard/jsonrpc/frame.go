package jsonrpc

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
)

// ErrTooLarge is returned by Reader.Next for a message over the size limit.
// The rest of the message is discarded, so the stream stays usable.
var ErrTooLarge = errors.New("message too large")

// shrinkAbove is the buffer size past which the Reader drops its buffer
// after a message, so that one huge message does not pin memory for the
// rest of the session.
const shrinkAbove = 1 << 20

// Reader splits a stream into newline-delimited messages, with no limit on
// a message's length other than the optional Max.
type Reader struct {
	r   *bufio.Reader
	buf []byte
	// Max is the largest message accepted, in bytes; 0 means no limit.
	Max int
}

// NewReader returns a Reader reading from r.
func NewReader(r io.Reader) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, 64<<10)}
}

// Next returns the next non-empty message, without its newline (a trailing
// CR is dropped too). The slice is valid until the next call. At the end of
// the stream it returns io.EOF; a final message without a newline is still
// returned first. A message over Max yields an error wrapping ErrTooLarge
// and, as the message, its first bytes (so a caller may find its id).
func (r *Reader) Next() ([]byte, error) {
	for {
		line, err := r.line()
		if err != nil && !(errors.Is(err, io.EOF) && len(line) > 0) {
			return line, err
		}
		line = bytes.TrimRight(line, "\r")
		if len(bytes.TrimSpace(line)) == 0 {
			if err != nil {
				return nil, err
			}
			continue
		}
		return line, nil
	}
}

func (r *Reader) line() ([]byte, error) {
	if cap(r.buf) > shrinkAbove {
		r.buf = nil
	}
	r.buf = r.buf[:0]
	for {
		chunk, err := r.r.ReadSlice('\n')
		if r.Max > 0 && len(r.buf)+len(chunk) > r.Max {
			head := append(r.buf, chunk...)
			if len(head) > 4096 {
				head = head[:4096]
			}
			r.buf = head
			if !errors.Is(err, bufio.ErrBufferFull) {
				return r.buf, fmt.Errorf("%w: over %d bytes", ErrTooLarge, r.Max)
			}
			n, derr := r.discardLine()
			if derr != nil && !errors.Is(derr, io.EOF) {
				return r.buf, derr
			}
			return r.buf, fmt.Errorf("%w: over %d bytes (%d discarded)", ErrTooLarge, r.Max, n)
		}
		switch {
		case err == nil:
			if len(r.buf) == 0 {
				return chunk[:len(chunk)-1], nil // common case: no copy
			}
			r.buf = append(r.buf, chunk[:len(chunk)-1]...)
			return r.buf, nil
		case errors.Is(err, bufio.ErrBufferFull):
			r.buf = append(r.buf, chunk...)
		default:
			r.buf = append(r.buf, chunk...)
			return r.buf, err
		}
	}
}

func (r *Reader) discardLine() (int, error) {
	n := 0
	for {
		chunk, err := r.r.ReadSlice('\n')
		n += len(chunk)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return n, err
		}
	}
}

// More reports whether a whole message is already buffered, so that the
// next Next will not block. A caller that relays messages queues its
// writes while More is true and flushes when it is not (see Writer.Queue).
func (r *Reader) More() bool {
	b, _ := r.r.Peek(r.r.Buffered())
	return bytes.IndexByte(b, '\n') >= 0
}

// Writer writes newline-delimited messages; it is safe for concurrent use
// and never interleaves two messages.
type Writer struct {
	// Canonical makes WriteMessage write the canonical encoding of what it
	// encodes (AppendCanonical). Write and Queue send their bytes as they
	// are: the caller forwards what it judged.
	Canonical bool

	mu sync.Mutex
	w  io.Writer
	q  []byte // queued messages, each with its newline
}

// copyBelow is the size under which Write copies the message to send it
// with its newline (and what is queued) in one write; larger ones go out
// in separate writes rather than being copied.
const copyBelow = 64 << 10

// NewWriter returns a Writer writing to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

var newline = []byte{'\n'}

// Write writes what was queued, then msg followed by a newline.
func (w *Writer) Write(msg []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(msg) < copyBelow {
		w.q = append(append(w.q, msg...), '\n')
		return w.flush()
	}
	if err := w.flush(); err != nil {
		return err
	}
	if _, err := w.w.Write(msg); err != nil {
		return err
	}
	_, err := w.w.Write(newline)
	return err
}

// Queue adds msg to what the next Write or Flush sends, so that messages
// that arrived together leave together, in one write(2). A queue over
// copyBelow bytes is written at once.
func (w *Writer) Queue(msg []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(msg) >= copyBelow {
		if err := w.flush(); err != nil {
			return err
		}
		if _, err := w.w.Write(msg); err != nil {
			return err
		}
		_, err := w.w.Write(newline)
		return err
	}
	w.q = append(append(w.q, msg...), '\n')
	if len(w.q) >= copyBelow {
		return w.flush()
	}
	return nil
}

// Flush writes what was queued.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.flush()
}

func (w *Writer) flush() error {
	if len(w.q) == 0 {
		return nil
	}
	_, err := w.w.Write(w.q)
	if cap(w.q) > shrinkAbove {
		w.q = nil
	} else {
		w.q = w.q[:0]
	}
	return err
}

// WriteMessage encodes and writes m.
func (w *Writer) WriteMessage(m *Message) error {
	b, err := m.Marshal()
	if err != nil {
		return fmt.Errorf("encode message: %w", err)
	}
	if w.Canonical {
		b = AppendCanonical(make([]byte, 0, len(b)), b)
	}
	return w.Write(b)
}
