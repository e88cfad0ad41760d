package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/FerretDB/wire/wireclient"
)

// FerretDB 1.24 runs a filtered update as two steps: it queries the matching documents, then
// writes each one back by _id alone, without re-checking the filter (upstream issue
// FerretDB/FerretDB#3040; both the SQLite and the PostgreSQL backend do it). Two concurrent
// replaceOne calls with the same {_id, "meta.rev": n} filter can therefore both report a
// modification, which breaks exactly the compare-and-swap the store relies on. MongoDB applies
// each single-document write atomically, so the test server restores that by letting at most one
// mutating command run at a time: FerretDB listens on a private Unix socket, and a small relay in
// front of it takes a global lock around every mutating command's request and reply. Reads pass
// through without the lock.

const (
	opCompressed = 2012
	opMsg        = 2013

	msgFlagMoreToCome = 1 << 1

	// Well above MongoDB's 48 MB message limit; anything larger is a corrupt stream.
	maxMessageLen = 64 << 20
)

// mutating names the commands that take the write lock. Everything else that modifies data in
// FerretDB 1.24 is one of these; the DDL commands are included because they are rare and
// serialising them costs nothing.
var mutating = map[string]bool{
	"insert": true, "update": true, "delete": true, "findAndModify": true, "findandmodify": true,
	"create": true, "drop": true, "dropDatabase": true, "createIndexes": true, "dropIndexes": true,
	"renameCollection": true, "collMod": true,
}

type relay struct {
	backend string // Unix socket FerretDB listens on
	logger  *slog.Logger
	writeMu sync.Mutex
}

// waitBackend returns once FerretDB answers a ping on its socket.
func (r *relay) waitBackend(ctx context.Context, running <-chan struct{}) error {
	for {
		if c, err := net.Dial("unix", r.backend); err == nil {
			conn := wireclient.New(c, r.logger)
			pingCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
			err = conn.Ping(pingCtx)
			cancel()
			_ = conn.Close()
			if err == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-running:
			return errors.New("FerretDB stopped before it listened")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (r *relay) serve(ctx context.Context, l net.Listener) error {
	go func() {
		<-ctx.Done()
		_ = l.Close()
	}()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		go r.handle(c)
	}
}

// handle pairs one client connection with one FerretDB connection for its whole life, so
// cursors, request ids and any per-connection state stay as the client expects.
func (r *relay) handle(client net.Conn) {
	defer client.Close()
	backend, err := net.Dial("unix", r.backend)
	if err != nil {
		r.logger.Warn("relay: cannot reach FerretDB", slog.Any("error", err))
		return
	}
	defer backend.Close()

	fromClient := bufio.NewReader(client)
	fromBackend := bufio.NewReader(backend)
	for {
		req, err := readMessage(fromClient)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				r.logger.Warn("relay: bad client message", slog.Any("error", err))
			}
			return
		}
		if tooManyUpdates(req) {
			if _, err := client.Write(refusal(req, "update commands with more than 50 statements deadlock FerretDB 1.24 (tools/ferretdb/guard.go): split them")); err != nil {
				return
			}
			continue
		}
		if err := r.exchange(req, backend, fromBackend, client); err != nil {
			return
		}
	}
}

// exchange forwards one request and every reply belonging to it.
func (r *relay) exchange(req []byte, backend net.Conn, fromBackend *bufio.Reader, client net.Conn) error {
	if needsLock(req) {
		r.writeMu.Lock()
		defer r.writeMu.Unlock()
	}
	if _, err := backend.Write(req); err != nil {
		return err
	}
	if isMoreToCome(req) {
		// Fire-and-forget (w:0) requests get no reply.
		return nil
	}
	for {
		reply, err := readMessage(fromBackend)
		if err != nil {
			return err
		}
		if _, err := client.Write(reply); err != nil {
			return err
		}
		// An exhaust stream keeps the moreToCome bit on every reply but the last.
		if !isMoreToCome(reply) {
			return nil
		}
	}
}

// readMessage reads one whole wire message, header included.
func readMessage(r *bufio.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := int(int32(binary.LittleEndian.Uint32(hdr[:])))
	if n < 16 || n > maxMessageLen {
		return nil, fmt.Errorf("message length %d out of range", n)
	}
	msg := make([]byte, n)
	copy(msg, hdr[:])
	if _, err := io.ReadFull(r, msg[4:]); err != nil {
		return nil, err
	}
	return msg, nil
}

func opCode(msg []byte) int32 { return int32(binary.LittleEndian.Uint32(msg[12:16])) }

func isMoreToCome(msg []byte) bool {
	return opCode(msg) == opMsg && len(msg) >= 20 && binary.LittleEndian.Uint32(msg[16:20])&msgFlagMoreToCome != 0
}

// needsLock reports whether a request may modify data. Messages it cannot read (compressed or
// malformed) are treated as mutating: being slow is harmless, racing is not.
func needsLock(msg []byte) bool {
	switch opCode(msg) {
	case opMsg:
		name, ok := commandName(msg)
		return !ok || mutating[name]
	case opCompressed:
		return true
	default:
		// Legacy OP_QUERY only carries the handshake from old drivers.
		return false
	}
}

// commandName finds the first key of the OP_MSG body section, which names the command.
func commandName(msg []byte) (string, bool) {
	b := msg[20:] // after the 16-byte header and the 4-byte flags
	for len(b) > 0 {
		kind := b[0]
		b = b[1:]
		if len(b) < 4 {
			return "", false
		}
		size := int(int32(binary.LittleEndian.Uint32(b)))
		if size < 5 || size > len(b) {
			return "", false
		}
		switch kind {
		case 0:
			// BSON document: int32 length, then elements of type byte + NUL-terminated name.
			doc := b[4:size]
			if len(doc) < 2 {
				return "", false
			}
			for i := 1; i < len(doc); i++ {
				if doc[i] == 0 {
					return string(doc[1:i]), true
				}
			}
			return "", false
		case 1:
			// Document sequence (e.g. the documents of an insert); its size includes itself.
			b = b[size:]
		default:
			return "", false
		}
	}
	return "", false
}
