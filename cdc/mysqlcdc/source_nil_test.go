package mysqlcdc

import "testing"

// New with nil options is refused like options naming no table.
func TestNewNilOptions(t *testing.T) {
	if _, err := New("127.0.0.1:3306", "u", "p", nil); err == nil {
		t.Fatal("New(..., nil) = nil error, want the no-captured-tables error")
	}
}
