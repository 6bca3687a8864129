package extauth_test

import (
	"errors"
	"fmt"

	"github.com/extauth/extauth"
)

// A user in more Entra ID groups than a token holds, whose groups could
// not be read at Microsoft Graph: InGroup says so rather than "not a
// member".
func ExampleDirectory_InGroup() {
	const adminsGroupID = "5f1a0c9e-7d2b-4c3a-9e8f-0a1b2c3d4e5f"
	id := &extauth.Identity{Provider: "oidc", UID: "adaSub", Directory: &extauth.Directory{
		TenantID: "aaaaaaaa-1111-4111-8111-aaaaaaaaaaaa", GroupsSource: extauth.GroupsUnresolved,
		GroupsProblem: "the access token's scopes allow no reading of group memberships",
	}}
	in, err := id.Directory.InGroup(adminsGroupID)
	switch {
	case errors.Is(err, extauth.ErrGroupsUnresolved):
		// Too many groups to know: deny, or look them up yourself.
		fmt.Println("groups unknown:", id.Directory.GroupsProblem)
	case in:
		fmt.Println("an administrator")
	default:
		fmt.Println("not an administrator")
	}
	// Output: groups unknown: the access token's scopes allow no reading of group memberships
}
