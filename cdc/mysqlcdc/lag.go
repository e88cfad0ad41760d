package mysqlcdc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/tributary-dev/tributary/cdc"
)

var _ cdc.LagReporter = (*Source)(nil)

// Lag implements cdc.LagReporter: how far cp trails the end of the server's binlog, measured
// over a short-lived connection of its own (bounded by ctx and the connect and query
// timeouts), whether a stream is open or not.
//
// Positions are binlog file sequence number << 32 | offset: Head is where the binlog ends now
// (SHOW BINLOG STATUS, or the spelling of the server's version), Applied the file and offset
// the checkpoint resumes at (every checkpoint carries them, GTID-positioned ones too). Bytes
// is the binlog between the two, across rotations (the sizes of SHOW BINARY LOGS). Without a
// checkpoint (cp nil), Applied is 0 and Bytes the whole binlog the server retains: all of it
// lies ahead of a pipeline that has not started. Retained is -1: the server keeps binlogs by
// its own expiry, not for a reader. A checkpoint whose file the server no longer lists
// (purged) or that lies beyond the binlog's end (another server, RESET MASTER) is an error.
func (s *Source) Lag(ctx context.Context, cp cdc.Checkpoint) (cdc.SourceLag, error) {
	var at *checkpoint
	if cp != nil {
		c, err := decodeCheckpoint(cp)
		if err != nil {
			return cdc.SourceLag{}, err
		}
		at = &c
	}
	conn, err := s.connect(ctx)
	if err != nil {
		return cdc.SourceLag{}, s.classify(err)
	}
	defer quit(conn)
	defer closeOnDone(ctx, conn)()
	file, pos, _, err := binlogStatus(conn)
	if err == nil {
		var logs []binlogFile
		if logs, err = binaryLogs(conn); err == nil {
			lag, err := lagOf(file, pos, logs, at)
			// An open stream that passed transactions of other tables with every change
			// delivered before them stored has passed their ends too, though no checkpoint
			// moved; so has one that handed out nothing unacknowledged (a snapshot that
			// found nothing, or ended on a snapshot checkpoint, included) where it started.
			if st := s.current.Load(); err == nil && st != nil {
				var c uint64
				if at != nil && at.Snapshot == nil {
					c = st.caughtUp.Load()
				}
				if p, ok := st.passedAcked(); ok {
					c = max(c, p)
				}
				if c > lag.Applied && c <= lag.Head {
					lag.Applied = c
					lag.Bytes = bytesBetween(c, file, pos, logs)
				}
			}
			return lag, err
		}
	}
	if ctx.Err() != nil {
		return cdc.SourceLag{}, ctx.Err()
	}
	return cdc.SourceLag{}, s.classify(err)
}

// binlogFile is one line of SHOW BINARY LOGS.
type binlogFile struct {
	name string
	size int64
}

func binaryLogs(conn *client.Conn) ([]binlogFile, error) {
	r, err := conn.Execute("SHOW BINARY LOGS")
	if err != nil {
		return nil, fmt.Errorf("mysqlcdc: list the binlog files: %w", err)
	}
	logs := make([]binlogFile, 0, r.RowNumber())
	for i := 0; i < r.RowNumber(); i++ {
		name, _ := r.GetStringByName(i, "Log_name")
		size, _ := r.GetIntByName(i, "File_size")
		logs = append(logs, binlogFile{name: name, size: size})
	}
	return logs, nil
}

// lagOf computes a measurement from the binlog's end (file, pos), the server's binlog files
// and the checkpoint (nil: none).
func lagOf(file string, pos uint32, logs []binlogFile, at *checkpoint) (cdc.SourceLag, error) {
	headIndex, err := binlogIndex(file)
	if err != nil {
		return cdc.SourceLag{}, err
	}
	lag := cdc.SourceLag{Head: headIndex<<32 | uint64(pos), Retained: -1}
	// The files up to the head, in order; the head file counts up to pos (its listed size
	// may have grown since the status was read).
	end := slices.IndexFunc(logs, func(f binlogFile) bool { return f.name == file })
	if end < 0 {
		return lag, fmt.Errorf("mysqlcdc: the server does not list its current binlog file %s", file)
	}
	through := slices.Clone(logs[:end+1])
	through[end].size = int64(pos)
	if at == nil || at.File == "" {
		for _, f := range through {
			lag.Bytes += f.size
		}
		return lag, nil
	}
	index, err := binlogIndex(at.File)
	if err != nil {
		return lag, err
	}
	lag.Applied = index<<32 | uint64(at.Pos)
	if lag.Applied > lag.Head {
		return lag, errors.New("mysqlcdc: the checkpoint lies beyond the end of the server's binlog (it belongs to another server, or the binlog was reset)")
	}
	if !slices.ContainsFunc(through, func(f binlogFile) bool { return f.name == at.File }) {
		return lag, fmt.Errorf("mysqlcdc: the server no longer has the checkpoint's binlog file %s (purged)", at.File)
	}
	lag.Bytes = bytesBetween(lag.Applied, file, pos, logs)
	return lag, nil
}

// bytesBetween is the binlog from the position from (seq<<32|pos) to (file, pos), across
// rotations; 0 when from's file is no longer listed.
func bytesBetween(from uint64, file string, pos uint32, logs []binlogFile) int64 {
	var n int64
	started := false
	for _, f := range logs {
		seq, err := binlogIndex(f.name)
		if err != nil {
			continue
		}
		size := f.size
		if f.name == file {
			size = int64(pos)
		}
		switch {
		case seq == from>>32:
			started = true
			n += size - int64(from&0xffffffff)
		case started:
			n += size
		}
		if f.name == file {
			break
		}
	}
	return max(n, 0)
}

// binlogStatus returns the binlog's end: file, offset and (MySQL) the executed GTID set. The
// statement was renamed: MariaDB 10.5.2 added SHOW BINLOG STATUS, MySQL 8.2 added SHOW BINARY
// LOG STATUS and 8.4 removed SHOW MASTER STATUS. The server's version picks the spelling; the
// others are tried should it be refused.
func binlogStatus(conn *client.Conn) (file string, pos uint32, executed string, err error) {
	first := binlogStatusStatement(conn.GetServerVersion())
	for _, q := range append([]string{first}, "SHOW BINLOG STATUS", "SHOW BINARY LOG STATUS", "SHOW MASTER STATUS") {
		if q == first && err != nil {
			continue // tried first
		}
		r, qerr := conn.Execute(q)
		if qerr != nil {
			err = qerr
			continue
		}
		if r.RowNumber() == 0 {
			return "", 0, "", cdc.Permanent(errors.New("mysqlcdc: the server has no binlog (log_bin is off)"))
		}
		file, _ = r.GetStringByName(0, "File")
		p, _ := r.GetUintByName(0, "Position")
		executed, _ = r.GetStringByName(0, "Executed_Gtid_Set")
		return file, uint32(p), executed, nil
	}
	return "", 0, "", fmt.Errorf("mysqlcdc: read binlog status: %w", err)
}

// binlogStatusStatement is the spelling of SHOW MASTER STATUS that a server of this version
// (as its handshake announces it, "10.11.6-MariaDB-log", "8.4.0") understands.
func binlogStatusStatement(version string) string {
	major, minor, patch := versionNumbers(version)
	at := func(a, b, c int) bool {
		return major > a || major == a && (minor > b || minor == b && patch >= c)
	}
	if strings.Contains(strings.ToLower(version), "mariadb") {
		if at(10, 5, 2) {
			return "SHOW BINLOG STATUS"
		}
		return "SHOW MASTER STATUS"
	}
	if at(8, 2, 0) {
		return "SHOW BINARY LOG STATUS"
	}
	return "SHOW MASTER STATUS"
}

// versionNumbers reads "major.minor.patch" at the start of a server version (0 where absent).
// MariaDB servers that announce themselves behind MySQL's replication prefix
// ("5.5.5-10.11.6-MariaDB") are read after it.
func versionNumbers(version string) (major, minor, patch int) {
	version = strings.TrimPrefix(version, "5.5.5-")
	parts := strings.SplitN(version, ".", 3)
	nums := [3]int{}
	for i, p := range parts {
		end := strings.IndexFunc(p, func(c rune) bool { return c < '0' || c > '9' })
		if end >= 0 {
			p = p[:end]
		}
		nums[i], _ = strconv.Atoi(p)
	}
	return nums[0], nums[1], nums[2]
}
