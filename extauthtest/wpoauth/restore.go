package wpoauth

// HonourRefreshToken makes the server take token as a live refresh token,
// as if the server that issued it had kept running: a test renews tokens
// that an application stored in an earlier run, or with an earlier
// release of extauth, against a server started afresh.
func (s *Server) HonourRefreshToken(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refresh.Put(token, struct{}{}, s.now().Add(refreshLifetime))
}
