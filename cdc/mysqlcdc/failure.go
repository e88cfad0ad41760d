package mysqlcdc

import (
	"errors"
	"fmt"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/tributary-dev/tributary/cdc"
)

// Server error codes that no reopening can cure (the server's own numbers; go-mysql names
// only some of them).
const (
	errDBAccessDenied      = 1044 // ER_DBACCESS_DENIED_ERROR
	errAccessDenied        = 1045 // ER_ACCESS_DENIED_ERROR
	errBadDB               = 1049 // ER_BAD_DB_ERROR
	errTableAccessDenied   = 1142 // ER_TABLEACCESS_DENIED_ERROR
	errColumnAccessDenied  = 1143 // ER_COLUMNACCESS_DENIED_ERROR
	errSpecificAccess      = 1227 // ER_SPECIFIC_ACCESS_DENIED_ERROR: a missing privilege (REPLICATION SLAVE, ...)
	errBinlogFatal         = 1236 // ER_MASTER_FATAL_ERROR_READING_BINLOG: see lostHistory
	errAccessDeniedNoPass  = 1698 // ER_ACCESS_DENIED_NO_PASSWORD_ERROR
	errPasswordExpired     = 1862 // ER_MUST_CHANGE_PASSWORD_LOGIN
	errMySQLAccountLocked  = 3118 // MySQL ER_ACCOUNT_HAS_BEEN_LOCKED
	errMariaDBSameServerID = 4052 // MariaDB ER_SLAVE_SAME_ID
	errMariaDBAccountLock  = 4151 // MariaDB ER_ACCOUNT_HAS_BEEN_LOCKED
)

// classify marks the failures that reopening the stream cannot cure as cdc.Permanent:
// refused credentials or privileges, an unknown database, a binlog position the server no
// longer (or never) had, and another replica registered with this reader's server id.
// Everything else -- a lost connection, a server shutting down or restarting, a timeout, a
// failure this package does not recognize -- stays retryable: a cdc.Runner reopens the stream
// from its stored checkpoint, which costs a reconnect, never data.
func (s *Source) classify(err error) error {
	if err == nil || cdc.IsPermanent(err) {
		return err
	}
	var me *mysql.MyError
	if !errors.As(err, &me) {
		return err
	}
	switch me.Code {
	case errDBAccessDenied, errAccessDenied, errBadDB, errTableAccessDenied, errColumnAccessDenied,
		errSpecificAccess, errAccessDeniedNoPass, errPasswordExpired, errMySQLAccountLocked, errMariaDBAccountLock:
		return cdc.Permanent(err)
	case errMariaDBSameServerID:
		return s.serverIDConflict(err)
	case errBinlogFatal:
		msg := strings.ToLower(me.Message)
		switch {
		case strings.Contains(msg, "same server_uuid/server_id"):
			return s.serverIDConflict(err) // MySQL's form of the same refusal
		case lostHistory(msg):
			return cdc.Permanent(fmt.Errorf("mysqlcdc: the server no longer has the binlog the checkpoint resumes from "+
				"(purged, or the checkpoint belongs to another server or an earlier RESET); take a new snapshot into a fresh "+
				"destination: %w", err))
		}
	}
	return err
}

// lostHistory recognizes, in an ER_MASTER_FATAL_ERROR_READING_BINLOG message, a server that
// cannot serve the requested position: the file is gone or never existed, the position is
// beyond its end, or the GTIDs are purged, missing or diverged (MySQL's and MariaDB's
// spellings, "master"/"source" and "slave"/"replica" alike). Other 1236 messages (a
// truncated event, an oversized packet) stay retryable.
func lostHistory(msg string) bool {
	for _, s := range []string{
		"could not find first log file name",  // both: the file is not in the binlog index
		"purged",                              // MySQL: GTIDs purged; MariaDB: "... have been purged"
		"could not find gtid state",           // MariaDB: GTID state older than every binlog
		"impossible position",                 // MariaDB: an offset beyond the file's end
		"position > file size",                // MySQL: the same
		"which is not in the master's binlog", // MariaDB: a GTID the server never logged
		"diverged",                            // MariaDB: the reader's GTIDs run ahead of the server's
		"more gtids than",                     // MySQL: the same
		"is missing the gtid",                 // MariaDB strict mode: a hole in the server's GTIDs
	} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// serverIDConflict is the refusal of a reader displaced by another that registered with the
// same server id. It is permanent: retrying would displace the other reader in turn, and the
// two would take turns for ever. A reader's own reconnect (a reopened stream, a restarted
// process) does not get here: the server displaces the dead connection, not the new one.
func (s *Source) serverIDConflict(err error) error {
	return cdc.Permanent(fmt.Errorf("mysqlcdc: another replica registered with this reader's server id %d; "+
		"give every reader of the server its own Options.ServerID: %w", s.opts.ServerID, err))
}

// withoutStack is err's message without the stack frames go-mysql's errors carry.
func withoutStack(err error) string {
	var keep []string
	for _, line := range strings.Split(err.Error(), "\n") {
		// Stack frames are "\tfile:line" lines and bare "pkg.Func" lines without spaces.
		if line == "" || strings.HasPrefix(line, "\t") || !strings.Contains(line, " ") {
			continue
		}
		keep = append(keep, line)
	}
	return strings.Join(keep, ": ")
}
