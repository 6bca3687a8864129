package oidcop

import "github.com/extauth/extauth/extauthtest/internal/endpoint"

// HonourRefreshToken makes the provider take token as a live refresh token
// of user u, granted for scope ("openid email profile offline_access",
// say), as if the provider that issued it had kept running: a test renews
// tokens that an application stored in an earlier run, or with an earlier
// release of extauth, against a provider started afresh. The grant has a
// session of its own at the provider, live for a day; a back-channel
// logout of it ends it, as it would end a sign-in's.
func (op *OP) HonourRefreshToken(token string, u User, scope string) {
	now := op.now()
	sess := &session{sid: endpoint.Random(16), user: u, authTime: now}
	op.mu.Lock()
	defer op.mu.Unlock()
	op.sessions.Put(sess.sid, sess, now.Add(sessionTTL))
	op.refresh.Put(token, &grant{req: &authRequest{scope: scope, maxAge: -1}, user: u, sid: sess.sid, authTime: now}, now.Add(sessionTTL))
}
