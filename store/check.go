package store

// Check validates ops for mode exactly as Do does first, and runs nothing: it returns the
// *RequestError Do would refuse the request with (every invalid operation, by index), or nil.
// A front end that translates requests (a gRPC or HTTP service) calls it to report its own
// translation failures and the Service's refusals in one answer.
func (s *Service) Check(ops []Op, mode Completion) error {
	return s.validate(ops, mode)
}
