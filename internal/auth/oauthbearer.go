package auth

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"
)

// OAuthBearer is the OAUTHBEARER mechanism (RFC 7628, KIP-255) with Kafka's
// unsecured-token validation (OAuthBearerUnsecuredValidatorCallbackHandler):
// the token is an unsigned JWT (alg "none"), so anyone can claim any
// principal. It is for tests and development only; a broker that enables it
// should say so (kawa serve logs a warning).
const OAuthBearer = "OAUTHBEARER"

// UnsecuredJWT are the options of Kafka's unsecured validator (its JAAS
// options unsecuredValidatorPrincipalClaimName, unsecuredValidatorRequiredScope,
// unsecuredValidatorAllowableClockSkewMs).
type UnsecuredJWT struct {
	PrincipalClaim     string        // claim naming the principal; "" is "sub"
	RequiredScope      []string      // scopes the token's "scope" claim must all hold
	AllowableClockSkew time.Duration // leeway on exp and iat
	Now                func() time.Time
}

// OAuthBearerMessage is a client's initial response (RFC 7628 section 3.1):
// gs2-header, then key=value pairs each ended by 0x01, then 0x01.
type OAuthBearerMessage struct {
	AuthzID    string            // from the gs2 header's a=, unescaped; "" if none
	Token      string            // the auth pair's bearer token
	Extensions map[string]string // the other pairs (Kafka's SASL extensions, KIP-342)
}

// Patterns of Kafka's OAuthBearerClientInitialResponse (RFC 7628 3.1 and
// RFC 5801's saslname for the authzid).
var (
	oauthKeyRE   = regexp.MustCompile(`^[A-Za-z]+$`)
	oauthValueRE = regexp.MustCompile(`^[\x21-\x7E \t\r\n]+$`)
	oauthAuthRE  = regexp.MustCompile(`^([A-Za-z0-9_]+) +([-_.A-Za-z0-9]+)$`)
)

// maxOAuthBearerMessage bounds a client's initial response: a JWT with a few
// claims is well under 8 KiB; more is refused before any parsing.
const maxOAuthBearerMessage = 64 << 10

// ParseOAuthBearer parses an OAUTHBEARER client initial response as Kafka's
// OAuthBearerClientInitialResponse does: gs2 header "n," or "y," (channel
// binding "p=" is refused), an optional a=authzid, then 0x01-separated
// key=value pairs ending in an empty one, with exactly one "auth" pair whose
// value is "Bearer <token>" (scheme case-insensitive).
func ParseOAuthBearer(msg []byte) (OAuthBearerMessage, error) {
	var m OAuthBearerMessage
	bad := func(why string) (OAuthBearerMessage, error) {
		return OAuthBearerMessage{}, errors.New("invalid OAUTHBEARER message: " + why)
	}
	if len(msg) > maxOAuthBearerMessage {
		return bad("too long")
	}
	gs2, rest, ok := bytes.Cut(msg, []byte{0x01})
	if !ok {
		return bad("no key=value pairs")
	}
	parts := strings.Split(string(gs2), ",")
	if len(parts) != 3 || parts[2] != "" || (parts[0] != "n" && parts[0] != "y") {
		return bad(`gs2 header must be "n,[a=authzid],"`)
	}
	if parts[1] != "" {
		az, ok := strings.CutPrefix(parts[1], "a=")
		if !ok || az == "" {
			return bad("malformed authorization id")
		}
		if az, ok = unescapeSASLName(az); !ok {
			return bad("malformed authorization id")
		}
		m.AuthzID = az
	}
	if !bytes.HasSuffix(rest, []byte{0x01}) {
		return bad("must end with an empty key=value pair")
	}
	pairs := strings.Split(string(rest[:len(rest)-1]), "\x01")
	// rest is "k=v\x01...k=v\x01" + final \x01 (trimmed): the last split
	// element is the empty pair before the terminator.
	if len(pairs) < 2 || pairs[len(pairs)-1] != "" {
		return bad("must end with an empty key=value pair")
	}
	m.Extensions = map[string]string{}
	haveAuth := false
	for _, p := range pairs[:len(pairs)-1] {
		k, v, ok := strings.Cut(p, "=")
		if !ok || !oauthKeyRE.MatchString(k) || !oauthValueRE.MatchString(v) {
			return bad("malformed key=value pair")
		}
		if k == "auth" {
			if haveAuth {
				return bad("auth given twice")
			}
			haveAuth = true
			sm := oauthAuthRE.FindStringSubmatch(v)
			if sm == nil || !strings.EqualFold(sm[1], "bearer") {
				return bad(`auth must be "Bearer <token>"`)
			}
			m.Token = sm[2]
			continue
		}
		if _, dup := m.Extensions[k]; dup {
			return bad("extension " + k + " given twice")
		}
		m.Extensions[k] = v
	}
	if !haveAuth {
		return bad("no auth pair")
	}
	return m, nil
}

// unescapeSASLName undoes RFC 5801's =2C and =3D; a bare '=' or ',' is
// malformed.
func unescapeSASLName(s string) (string, bool) {
	if strings.Contains(s, ",") {
		return "", false
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", false
		}
		i += 2
	}
	return b.String(), true
}

// errInvalidToken and errInsufficientScope are RFC 7628 section 3.2.2's
// error statuses, told to the client as a JSON challenge.
var (
	errInvalidToken      = errors.New("invalid_token")
	errInsufficientScope = errors.New("insufficient_scope")
)

// ValidateUnsecuredJWT checks token as Kafka's unsecured validator does
// (OAuthBearerUnsecuredJws and OAuthBearerValidationUtils): three
// base64url parts with an empty signature, a header with "alg":"none", a
// non-empty string principal claim, an "exp" (seconds since the epoch,
// possibly fractional) not yet passed, an "iat", if present, not in the
// future and before exp, and every required scope in the "scope" claim (a
// space-separated string or a list). It returns the principal and the
// expiry. A failed check wraps invalid_token or insufficient_scope.
func ValidateUnsecuredJWT(token string, o UnsecuredJWT) (principal string, exp time.Time, err error) {
	invalid := func(why string) (string, time.Time, error) {
		return "", time.Time{}, fmt.Errorf("%w: %s", errInvalidToken, why)
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return invalid("not a JWS compact serialization (three dot-separated parts)")
	}
	if parts[2] != "" {
		return invalid("an unsecured JWS must have an empty signature")
	}
	var header map[string]any
	if err := decodeJWTPart(parts[0], &header); err != nil {
		return invalid("header: " + err.Error())
	}
	if alg, _ := header["alg"].(string); alg != "none" {
		return invalid(`header "alg" must be "none"`)
	}
	var claims map[string]any
	if err := decodeJWTPart(parts[1], &claims); err != nil {
		return invalid("claims: " + err.Error())
	}
	claim := o.PrincipalClaim
	if claim == "" {
		claim = "sub"
	}
	principal, _ = claims[claim].(string)
	if strings.TrimSpace(principal) == "" {
		return invalid("no principal claim " + claim)
	}
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	t := now()
	expSec, ok := claims["exp"].(float64)
	if !ok || math.IsNaN(expSec) || math.IsInf(expSec, 0) || math.Abs(expSec) > 1e12 {
		return invalid(`no numeric "exp" claim`)
	}
	exp = time.UnixMilli(int64(expSec * 1000))
	if !t.Add(-o.AllowableClockSkew).Before(exp) {
		return invalid("the token has expired")
	}
	if v, present := claims["iat"]; present {
		iatSec, ok := v.(float64)
		if !ok || math.IsNaN(iatSec) || math.IsInf(iatSec, 0) || math.Abs(iatSec) > 1e12 {
			return invalid(`"iat" is not a number`)
		}
		iat := time.UnixMilli(int64(iatSec * 1000))
		if iat.After(t.Add(o.AllowableClockSkew)) {
			return invalid("the token was issued in the future")
		}
		if !iat.Before(exp) {
			return invalid("the token expires before it was issued")
		}
	}
	if len(o.RequiredScope) > 0 {
		var have []string
		switch s := claims["scope"].(type) {
		case string:
			have = strings.Fields(s)
		case []any:
			for _, e := range s {
				if str, ok := e.(string); ok {
					have = append(have, str)
				}
			}
		}
		for _, want := range o.RequiredScope {
			if !slices.Contains(have, want) {
				return "", time.Time{}, fmt.Errorf("%w: scope %q is required", errInsufficientScope, want)
			}
		}
	}
	return principal, exp, nil
}

// decodeJWTPart decodes one base64url (unpadded, RFC 7515) JSON object.
func decodeJWTPart(part string, v *map[string]any) error {
	b, err := base64.RawURLEncoding.DecodeString(part)
	if err != nil {
		return errors.New("not base64url")
	}
	if err := json.Unmarshal(b, v); err != nil || *v == nil {
		return errors.New("not a JSON object")
	}
	return nil
}

// oauthSession is one OAUTHBEARER exchange (Kafka's OAuthBearerSaslServer):
// a valid initial response logs in at once; an invalid token is answered
// with RFC 7628's JSON error challenge, which the client acknowledges with
// a lone 0x01, and then fails.
type oauthSession struct {
	opts      UnsecuredJWT
	user      string
	exp       time.Time
	challenge string // the error challenge sent; "" before
	done      bool
}

func (s *oauthSession) Step(in []byte) ([]byte, bool, error) {
	if s.challenge != "" {
		// The acknowledgement of our error challenge: the exchange fails with
		// the challenge as its message, as in Kafka.
		s.done = true
		return nil, false, fmt.Errorf("%w (%s)", ErrAuthentication, s.challenge)
	}
	if s.done {
		return nil, false, errors.New("SASL/OAUTHBEARER exchange already complete")
	}
	m, err := ParseOAuthBearer(in)
	if err != nil {
		s.done = true
		return nil, false, err
	}
	user, exp, err := ValidateUnsecuredJWT(m.Token, s.opts)
	if err != nil {
		status := map[string]string{"status": errInvalidToken.Error()}
		if errors.Is(err, errInsufficientScope) {
			status = map[string]string{"status": errInsufficientScope.Error(), "scope": strings.Join(s.opts.RequiredScope, " ")}
		}
		js, _ := json.Marshal(status)
		s.challenge = string(js)
		return js, false, nil
	}
	s.done = true
	if m.AuthzID != "" && m.AuthzID != user {
		//lint:ignore ST1005 same prefix as Kafka's failure text (ErrAuthentication)
		return nil, false, errors.New("Authentication failed: the authorization id differs from the token's principal")
	}
	s.user, s.exp = user, exp
	return nil, true, nil
}

func (s *oauthSession) User() string { return s.user }

// Expires is when the token ends: the session may last no longer (KIP-368).
func (s *oauthSession) Expires() time.Time { return s.exp }

// Expiring is a Session whose credential has an end (OAUTHBEARER's exp);
// the server ends the session then, re-authentication or not.
type Expiring interface {
	Expires() time.Time
}
