package mysqlcdc

import "testing"

// New refuses a source capturing no table, and takes nil options as every default.
func TestNewTablesAndNilOptions(t *testing.T) {
	if _, err := New("127.0.0.1:3306", "u", "p", nil, nil); err == nil {
		t.Fatal("New without tables = nil error, want the no-captured-tables error")
	}
	src, err := New("127.0.0.1:3306", "u", "p", []TableName{{Database: "d", Table: "t"}}, nil)
	if err != nil {
		t.Fatalf("New with a table and nil options: %v", err)
	}
	if src.opts.Flavor != MariaDB || src.opts.SourceName != "mysql" || !src.captures(TableName{Database: "d", Table: "t"}) {
		t.Fatalf("nil options: flavor %q, source %q, want the defaults capturing d.t", src.opts.Flavor, src.opts.SourceName)
	}
}
