package testenv

import (
	"errors"
	"strings"
)

// MySQL is the parts of the MariaDB test server's DSN that a binlog reader or a client needs.
type MySQL struct{ User, Password, Addr, DB string }

// ParseMySQLDSN splits a go-sql-driver/mysql DSN, user:pass@tcp(host:port)/db[?params]. The
// password may contain '@' and ':' (the last '@' ends it). Errors never quote the DSN: it holds
// the password.
func ParseMySQLDSN(dsn string) (MySQL, error) {
	at := strings.LastIndex(dsn, "@")
	if at < 0 {
		return MySQL{}, errors.New("no user@ part in the DSN")
	}
	var m MySQL
	m.User, m.Password, _ = strings.Cut(dsn[:at], ":")
	rest, ok := strings.CutPrefix(dsn[at+1:], "tcp(")
	if !ok {
		return MySQL{}, errors.New("the DSN's address is not tcp(host:port)")
	}
	m.Addr, rest, ok = strings.Cut(rest, ")")
	if !ok || !strings.HasPrefix(rest, "/") {
		return MySQL{}, errors.New("the DSN has no /database after the address")
	}
	m.DB, _, _ = strings.Cut(rest[1:], "?")
	if m.User == "" || m.Addr == "" || m.DB == "" {
		return MySQL{}, errors.New("the DSN lacks a user, an address or a database")
	}
	return m, nil
}
