// Package charset decodes MySQL character data to UTF-8. The binlog source (mysqlcdc) decodes
// the columns it delivers as text, and the sink decodes the TEXT values it receives base64-wrapped;
// both use this one table so they always agree.
package charset
