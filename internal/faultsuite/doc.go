// Package faultsuite is the fault suite of the whole mirror (draft).
package faultsuite
