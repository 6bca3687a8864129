package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	_ "modernc.org/sqlite" // the pure-Go SQLite driver, registered as "sqlite"

	"github.com/extauth/extauth"
)

// store keeps the application's users and sessions in SQLite. A user is
// the account at one provider: the pair (provider, uid) is its key, since
// only that pair is stable (an email address can change hands, and two
// providers may report the same one for different people).
type store struct {
	db *sql.DB
}

const schema = `
CREATE TABLE IF NOT EXISTS users (
	provider       TEXT    NOT NULL,
	uid            TEXT    NOT NULL,
	name           TEXT    NOT NULL DEFAULT '',
	email          TEXT    NOT NULL DEFAULT '',
	email_verified INTEGER NOT NULL DEFAULT 0,
	created_at     INTEGER NOT NULL,
	last_sign_in   INTEGER NOT NULL,
	sign_ins       INTEGER NOT NULL DEFAULT 1,
	PRIMARY KEY (provider, uid)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS sessions (
	token_hash       TEXT    PRIMARY KEY,
	provider         TEXT    NOT NULL,
	uid              TEXT    NOT NULL,
	-- Who the provider's logouts name: the uid, or the SAML NameID; and
	-- its session (the OpenID Connect sid, the SAML SessionIndex).
	subject          TEXT    NOT NULL,
	provider_session TEXT    NOT NULL DEFAULT '',
	-- What ending the provider's session needs (extauth.LogoutSession).
	id_token         TEXT    NOT NULL DEFAULT '',
	name_id          TEXT    NOT NULL DEFAULT '',
	name_id_format   TEXT    NOT NULL DEFAULT '',
	-- The NameID's other attributes: the LogoutRequest must carry the
	-- NameID exactly as the IdP sent it.
	name_qualifier    TEXT NOT NULL DEFAULT '',
	sp_name_qualifier TEXT NOT NULL DEFAULT '',
	sp_provided_id    TEXT NOT NULL DEFAULT '',
	session_index    TEXT    NOT NULL DEFAULT '',
	expires_at       INTEGER NOT NULL,
	FOREIGN KEY (provider, uid) REFERENCES users (provider, uid) ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS sessions_by_subject ON sessions (provider, subject);
`

// openStore opens (creating if need be) the database at path.
func openStore(ctx context.Context, path string) (*store, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)&_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		return nil, err
	}
	// One writer at a time is what SQLite does anyway; one connection
	// keeps it from answering "database is locked".
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("schema: %w", err)
	}
	return &store{db: db}, nil
}

func (s *store) Close() error { return s.db.Close() }

// user is a row of users.
type user struct {
	Provider, UID, Name, Email string
	EmailVerified              bool
	CreatedAt, LastSignIn      time.Time
	SignIns                    int
}

// signIn records a sign-in of id: the user, created on first sign-in and
// updated with what the provider says now.
func (s *store) signIn(ctx context.Context, id *extauth.Identity, now time.Time) error {
	_, err := s.db.ExecContext(ctx, `
INSERT INTO users (provider, uid, name, email, email_verified, created_at, last_sign_in)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (provider, uid) DO UPDATE SET
	name = excluded.name, email = excluded.email, email_verified = excluded.email_verified,
	last_sign_in = excluded.last_sign_in, sign_ins = sign_ins + 1`,
		id.Provider, id.UID, displayName(id), id.Email, id.EmailVerified, now.Unix(), now.Unix())
	return err
}

func displayName(id *extauth.Identity) string {
	for _, n := range []string{id.Name, id.NickName, id.Email, id.UID} {
		if n != "" {
			return n
		}
	}
	return ""
}

// user returns the user (provider, uid).
func (s *store) user(ctx context.Context, provider, uid string) (*user, error) {
	var u user
	var created, last int64
	err := s.db.QueryRowContext(ctx, `SELECT provider, uid, name, email, email_verified, created_at, last_sign_in, sign_ins
FROM users WHERE provider = ? AND uid = ?`, provider, uid).Scan(&u.Provider, &u.UID, &u.Name, &u.Email, &u.EmailVerified, &created, &last, &u.SignIns)
	if err != nil {
		return nil, err
	}
	u.CreatedAt, u.LastSignIn = time.Unix(created, 0), time.Unix(last, 0)
	return &u, nil
}

// session is a row of sessions: a signed-in browser.
type session struct {
	Provider, UID string
	Logout        extauth.LogoutSession
}

// sessionTTL is how long a session lasts.
const sessionTTL = 30 * 24 * time.Hour

// newSession starts a session for id and returns its token, for the
// cookie. The database keeps only the token's hash: a copy of the
// database does not let anyone in.
func (s *store) newSession(ctx context.Context, id *extauth.Identity, now time.Time) (string, error) {
	b := make([]byte, 32)
	rand.Read(b)
	token := base64.RawURLEncoding.EncodeToString(b)
	subject := id.UID
	if id.SAML != nil && id.SAML.NameID != "" {
		subject = id.SAML.NameID
	}
	lo := id.LogoutSession()
	_, err := s.db.ExecContext(ctx, `INSERT INTO sessions
(token_hash, provider, uid, subject, provider_session, id_token, name_id, name_id_format,
 name_qualifier, sp_name_qualifier, sp_provided_id, session_index, expires_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		hashToken(token), id.Provider, id.UID, subject, id.SessionID, lo.IDToken, lo.NameID, lo.NameIDFormat,
		lo.NameQualifier, lo.SPNameQualifier, lo.SPProvidedID, lo.SessionIndex, now.Add(sessionTTL).Unix())
	return token, err
}

// session returns the live session of token, or sql.ErrNoRows.
func (s *store) session(ctx context.Context, token string, now time.Time) (*session, error) {
	var ss session
	err := s.db.QueryRowContext(ctx, `SELECT provider, uid, id_token, name_id, name_id_format,
name_qualifier, sp_name_qualifier, sp_provided_id, session_index
FROM sessions WHERE token_hash = ? AND expires_at > ?`, hashToken(token), now.Unix()).
		Scan(&ss.Provider, &ss.UID, &ss.Logout.IDToken, &ss.Logout.NameID, &ss.Logout.NameIDFormat,
			&ss.Logout.NameQualifier, &ss.Logout.SPNameQualifier, &ss.Logout.SPProvidedID, &ss.Logout.SessionIndex)
	if err != nil {
		return nil, err
	}
	return &ss, nil
}

// endSession deletes the session of token and returns it.
func (s *store) endSession(ctx context.Context, token string, now time.Time) (*session, error) {
	ss, err := s.session(ctx, token, now)
	if err != nil {
		return nil, err
	}
	_, err = s.db.ExecContext(ctx, `DELETE FROM sessions WHERE token_hash = ?`, hashToken(token))
	return ss, err
}

// endProviderSessions deletes the sessions a provider's logout names: the
// one of its session, or every one of its subject.
func (s *store) endProviderSessions(ctx context.Context, e extauth.LogoutEvent) (int64, error) {
	if e.Subject == "" && e.Session == "" {
		return 0, errors.New("a logout that names nobody")
	}
	res, err := s.db.ExecContext(ctx, `DELETE FROM sessions WHERE provider = ?
AND (? = '' OR subject = ?) AND (? = '' OR provider_session = ?)`,
		string(e.Provider), e.Subject, e.Subject, e.Session, e.Session)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func hashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}
