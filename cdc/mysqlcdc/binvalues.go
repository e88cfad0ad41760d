package mysqlcdc

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strconv"
	"strings"
	"unsafe"

	"github.com/tributary-dev/tributary/cdc"
)

// The binlog's storage formats of DECIMAL and the temporal types, rendered as the strings the
// values have always had: those of go-mysql's decoder (with ParseTime off), which are the
// server's own text forms. Each renders into a stack buffer and allocates only the result.

// dig2bytes is the bytes a group of up to 9 decimal digits takes in a stored DECIMAL.
var dig2bytes = [10]int{0, 1, 1, 2, 2, 3, 3, 4, 4, 4}

// decimalSize is the stored size of a DECIMAL(precision, scale).
func decimalSize(precision, scale int) int {
	intg := precision - scale
	return intg/9*4 + dig2bytes[intg%9] + scale/9*4 + dig2bytes[scale%9]
}

// decimalText renders a stored DECIMAL(precision, scale): big-endian groups of 9 digits (4
// bytes) with a shorter leading and trailing group, the sign in the first bit, negative
// values with every bit inverted.
func decimalText(b []byte, precision, scale int) (string, int) {
	intg := precision - scale
	size := decimalSize(precision, scale)
	var raw [64]byte
	d := raw[:0]
	if size <= len(raw) {
		d = raw[:size]
	} else {
		d = make([]byte, size)
	}
	copy(d, b[:size])
	neg := d[0]&0x80 == 0
	d[0] ^= 0x80
	var buf [96]byte
	out := buf[:0]
	if neg {
		out = append(out, '-')
	}
	if neg {
		for k := range d {
			d[k] ^= 0xff
		}
	}
	leading := true
	if v := beUint(d, dig2bytes[intg%9]); v != 0 {
		leading = false
		out = strconv.AppendUint(out, v, 10)
	}
	d = d[dig2bytes[intg%9]:]
	for range intg / 9 {
		v := uint64(binary.BigEndian.Uint32(d))
		d = d[4:]
		switch {
		case !leading:
			out = appendPadded(out, v, 9)
		case v != 0:
			leading = false
			out = strconv.AppendUint(out, v, 10)
		}
	}
	if leading {
		out = append(out, '0')
	}
	if len(d) > 0 {
		out = append(out, '.')
		for range scale / 9 {
			out = appendPadded(out, uint64(binary.BigEndian.Uint32(d)), 9)
			d = d[4:]
		}
		if n := dig2bytes[scale%9]; n > 0 {
			out = appendPadded(out, beUint(d, n), scale%9)
		}
	}
	return string(out), size
}

// appendPadded appends v in decimal with at least width digits (fmt's %0*d).
func appendPadded(out []byte, v uint64, width int) []byte {
	switch {
	case width == 2 && v < 100:
		return append(out, byte('0'+v/10), byte('0'+v%10))
	case width == 4 && v < 10000:
		return append(out, byte('0'+v/1000), byte('0'+v/100%10), byte('0'+v/10%10), byte('0'+v%10))
	}
	var tmp [20]byte
	s := strconv.AppendUint(tmp[:0], v, 10)
	for i := len(s); i < width; i++ {
		out = append(out, '0')
	}
	return append(out, s...)
}

// beUint reads n bytes big-endian.
func beUint(b []byte, n int) uint64 {
	var v uint64
	for _, x := range b[:n] {
		v = v<<8 | uint64(x)
	}
	return v
}

// fraction reads the fractional seconds of a TIME2, DATETIME2 or TIMESTAMP2 value stored
// with fsp digits, in microseconds.
func fraction(b []byte, fsp uint16) int64 {
	switch fsp {
	case 1, 2:
		return int64(b[0]) * 10000
	case 3, 4:
		return int64(binary.BigEndian.Uint16(b)) * 100
	case 5, 6:
		return int64(beUint(b, 3))
	}
	return 0
}

// appendFraction appends ".ffffff" cut to fsp digits; nothing for fsp 0.
func appendFraction(out []byte, us int64, fsp uint16) []byte {
	if fsp == 0 {
		return out
	}
	out = append(out, '.')
	out = appendPadded(out, uint64(us), 6)
	return out[:len(out)-(6-int(fsp))]
}

// dateText renders a DATE: day, month and year in bit fields of 3 bytes.
func dateText(b []byte) string {
	v := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16
	if v == 0 {
		return "0000-00-00"
	}
	var buf [16]byte
	out := appendPadded(buf[:0], v/(16*32), 4)
	out = append(out, '-')
	out = appendPadded(out, v/32%16, 2)
	out = append(out, '-')
	out = appendPadded(out, v%32, 2)
	return string(out)
}

// oldTimeText renders a pre-5.6 TIME: HHMMSS as a 3-byte integer.
func oldTimeText(b []byte) string {
	v := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16
	if v == 0 {
		return "00:00:00"
	}
	var buf [16]byte
	return string(appendHMS(buf[:0], "", v/10000, v%10000/100, v%100))
}

func appendHMS(out []byte, sign string, h, m, s uint64) []byte {
	out = append(out, sign...)
	out = appendPadded(out, h, 2)
	out = append(out, ':')
	out = appendPadded(out, m, 2)
	out = append(out, ':')
	return appendPadded(out, s, 2)
}

// oldDatetimeText renders a pre-5.6 DATETIME: YYYYMMDDHHMMSS as an 8-byte integer.
func oldDatetimeText(b []byte) string {
	v := binary.LittleEndian.Uint64(b)
	if v == 0 {
		return "0000-00-00 00:00:00"
	}
	d, t := v/1000000, v%1000000
	var buf [32]byte
	return string(appendDatetime(buf[:0], d/10000, d%10000/100, d%100, t/10000, t%10000/100, t%100))
}

func appendDatetime(out []byte, year, month, day, hour, minute, second uint64) []byte {
	out = appendPadded(out, year, 4)
	out = append(out, '-')
	out = appendPadded(out, month, 2)
	out = append(out, '-')
	out = appendPadded(out, day, 2)
	out = append(out, ' ')
	return appendHMS(out, "", hour, minute, second)
}

// Offsets of the stored TIME2 and DATETIME2 integers (they are kept positive for sorting).
const (
	datetimeOffset = 0x8000000000
	timeIntOffset  = 0x800000
	timeOffset     = 0x800000000000
)

// datetime2Text renders a DATETIME2(fsp): 40 bits of year*13+month, day, hour, minute,
// second, then the fraction.
func datetime2Text(b []byte, fsp uint16) (string, int) {
	n := 5 + (int(fsp)+1)/2
	intPart := int64(beUint(b, 5)) - datetimeOffset
	frac := fraction(b[5:], fsp)
	var buf [40]byte
	if intPart == 0 {
		out := append(buf[:0], "0000-00-00 00:00:00"...)
		return string(appendFraction(out, frac, fsp)), n
	}
	tmp := intPart<<24 + frac
	if tmp < 0 {
		tmp = -tmp
	}
	ymdhms := uint64(tmp >> 24)
	ymd, hms := ymdhms>>17, ymdhms%(1<<17)
	ym := ymd >> 5
	out := appendDatetime(buf[:0], ym/13, ym%13, ymd%(1<<5), hms>>12, (hms>>6)%(1<<6), hms%(1<<6))
	return string(appendFraction(out, frac, fsp)), n
}

// time2Text renders a TIME2(fsp): a signed count of hours, minutes and seconds with a
// fraction, negative values with the fraction stored in reverse order.
func time2Text(b []byte, fsp uint16) (string, int) {
	n := 3 + (int(fsp)+1)/2
	var tmp, intPart, frac int64
	switch fsp {
	case 1, 2:
		intPart = int64(beUint(b, 3)) - timeIntOffset
		frac = int64(b[3])
		if intPart < 0 && frac != 0 {
			intPart++
			frac -= 0x100
		}
		tmp = intPart<<24 + frac*10000
	case 3, 4:
		intPart = int64(beUint(b, 3)) - timeIntOffset
		frac = int64(binary.BigEndian.Uint16(b[3:]))
		if intPart < 0 && frac != 0 {
			intPart++
			frac -= 0x10000
		}
		tmp = intPart<<24 + frac*100
	case 5, 6:
		return timeText(int64(beUint(b, 6))-timeOffset, fsp), n
	default:
		intPart = int64(beUint(b, 3)) - timeIntOffset
		tmp = intPart << 24
	}
	if intPart == 0 && frac == 0 {
		return "00:00:00", n
	}
	return timeText(tmp, fsp), n
}

func timeText(tmp int64, fsp uint16) string {
	sign := ""
	if tmp < 0 {
		tmp, sign = -tmp, "-"
	}
	hms := uint64(tmp >> 24)
	var buf [32]byte
	out := appendHMS(buf[:0], sign, (hms>>12)%(1<<10), (hms>>6)%(1<<6), hms%(1<<6))
	if us := tmp % (1 << 24); us != 0 {
		out = append(out, '.')
		out = appendPadded(out, uint64(us), 6)
		out = out[:len(out)-(6-int(fsp))]
	}
	return string(out)
}

// pow10 are the microsecond units of the fraction digits fsp leaves out.
var pow10 = [7]int64{1000000, 100000, 10000, 1000, 100, 10, 1}

// timestamp2Micros reads a TIMESTAMP2(fsp): seconds since the epoch (big-endian), then the
// fraction, cut to fsp digits as the server's text would show it; 0 is the zero timestamp.
func timestamp2Micros(b []byte, fsp uint16) (int64, int) {
	n := 4 + (int(fsp)+1)/2
	sec := int64(binary.BigEndian.Uint32(b))
	if sec == 0 {
		return 0, n
	}
	us := fraction(b[4:], fsp)
	if fsp <= 6 {
		us -= us % pow10[fsp]
	}
	return sec*1_000_000 + us, n
}

// base64Value encodes b, zero-padded to padTo bytes (BINARY(n): the binlog drops trailing
// zero bytes the server pads back on read), with one allocation for the result.
func base64Value(b []byte, padTo int) cdc.Base64 {
	if len(b) < padTo {
		var tmp [256]byte
		p := tmp[:0]
		if padTo > len(tmp) {
			p = make([]byte, 0, padTo)
		}
		p = append(p, b...)
		p = p[:padTo]
		clear(p[len(b):])
		b = p
	}
	if len(b) == 0 {
		return ""
	}
	out := make([]byte, base64.StdEncoding.EncodedLen(len(b)))
	base64.StdEncoding.Encode(out, b)
	return cdc.Base64(unsafe.String(unsafe.SliceData(out), len(out))) // out is never written again
}

// errTemporalRange says a stored TIME2, DATETIME2 or TIMESTAMP2 holds fields no server writes
// (an hour of 25, a minute of 61, a fraction of more than 999999 µs, a negative DATETIME): its
// rendering would be no value of the column.
var errTemporalRange = errors.New("mysqlcdc: temporal value out of range")

// datetimeTextOK says whether s is "YYYY-MM-DD hh:mm:ss" with fsp fraction digits and fields
// in range (zero months and days are MariaDB's zero dates).
func datetimeTextOK(s string, fsp int) bool {
	if len(s) < 19 || s[4] != '-' || s[7] != '-' || s[10] != ' ' {
		return false
	}
	return digitsAtMost(s[5:7], 12) && digitsAtMost(s[8:10], 31) && clockOK(s[11:], 23, fsp)
}

// timeTextOK says whether s is a TIME: "[-]hh:mm:ss" (at most 838 hours) with fsp fraction
// digits, or none (time2Text leaves out a zero fraction).
func timeTextOK(s string, fsp int) bool {
	s = strings.TrimPrefix(s, "-")
	h := strings.IndexByte(s, ':')
	return h >= 2 && h <= 3 && (clockOK(s[h-2:], 99, fsp) || clockOK(s[h-2:], 99, 0)) && digitsAtMost(s[:h], 838)
}

// clockOK checks "hh:mm:ss[.f...]": hours up to maxHour, fsp fraction digits.
func clockOK(s string, maxHour uint64, fsp int) bool {
	want := 8
	if fsp > 0 {
		want += 1 + fsp
	}
	return len(s) == want && s[2] == ':' && s[5] == ':' && digitsAtMost(s[:2], maxHour) &&
		digitsAtMost(s[3:5], 59) && digitsAtMost(s[6:8], 59) && (fsp == 0 || s[8] == '.' && digitsAtMost(s[9:], 999999))
}

// digitsAtMost says whether s is decimal digits of a value at most max.
func digitsAtMost(s string, max uint64) bool {
	if s == "" {
		return false
	}
	v := uint64(0)
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
		v = v*10 + uint64(s[i]-'0')
	}
	return v <= max
}
