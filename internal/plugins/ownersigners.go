package plugins

import (
	"fmt"
)

// maxTrustFileLen bounds the catalog and the owner's signers file.
const maxTrustFileLen = 1 << 20

// signerJSON is one signer as the catalog's publisher and the owner's
// signers.json write it.
type signerJSON struct {
	Name           string `json:"name"`
	Issuer         string `json:"issuer,omitempty"`
	Subject        string `json:"subject,omitempty"`
	SubjectPattern string `json:"subjectPattern,omitempty"`
	PublicKey      string `json:"publicKey,omitempty"`
}

func (s signerJSON) signer(kind SignerKind) Signer {
	return Signer{
		Name: s.Name,
		Kind: kind,
		Identity: SignerIdentity{
			Issuer:         s.Issuer,
			Subject:        s.Subject,
			SubjectPattern: s.SubjectPattern,
			PublicKeyPEM:   s.PublicKey,
		},
	}
}

// ownerSignersFile is the shape of signers.json in the ConfigMap
// openfief-trusted-signers.
type ownerSignersFile struct {
	Signers *[]signerJSON `json:"signers"`
}

// OwnerSignersConfigMap is the optional ConfigMap that holds the owner's
// trusted signers (D-45), and OwnerSignersKey its key, mounted at
// /etc/openfief/trust.
const (
	OwnerSignersConfigMap = "openfief-trusted-signers"
	OwnerSignersKey       = "signers.json"
)

// ParseOwnerSigners reads the owner's signers.json strictly (D-45): one JSON
// object {"signers": [...]}, each signer {"name", "issuer" with "subject" or
// "subjectPattern"} or {"name", "publicKey"}. Unknown or repeated fields,
// trailing data, a name another signer in the file has (letter case aside),
// a name reserved for OpenFief's own signers ("openfief" and "openfief-...",
// signernames.go) or any invalid signer refuse the whole file: the operator
// then trusts no owner signer until it is valid (OF-31; started with a
// fixed --trusted-signers file, it refuses to start), the CLI refuses it.
// A name a catalog publisher has is refused by NewTrustPolicy, which knows
// the catalog. Every signer has kind SignerOwner.
// Errors wrap ErrInvalidSigner and carry *FieldError paths such as
// "signers[1].subjectPattern".
func ParseOwnerSigners(data []byte) ([]Signer, error) {
	if len(data) > maxTrustFileLen {
		return nil, &FieldError{Field: OwnerSignersKey, Err: ErrInvalidSigner, Detail: fmt.Sprintf("longer than %d bytes", maxTrustFileLen)}
	}
	var f ownerSignersFile
	if path, err := strictDecode(data, &f); err != nil {
		return nil, &FieldError{Field: orDocument(path, OwnerSignersKey), Err: ErrInvalidSigner, Detail: err.Error()}
	}
	if f.Signers == nil {
		return nil, &FieldError{Field: "signers", Err: ErrInvalidSigner, Detail: "required (write [] for none)"}
	}
	var errs fieldErrors
	signers := make([]Signer, 0, len(*f.Signers))
	names := signerNames{}
	for i, sj := range *f.Signers {
		field := fmt.Sprintf("signers[%d]", i)
		s := sj.signer(SignerOwner)
		_, serrs := compileSigner(s, field)
		errs = append(errs, serrs...)
		if err := names.add(s, field); err != nil {
			errs.add(field+".name", ErrInvalidSigner, err.Error())
		}
		signers = append(signers, s)
	}
	if err := errs.err(); err != nil {
		return nil, err
	}
	return signers, nil
}

// orDocument names the whole document when a JSON problem has no field path.
func orDocument(path, document string) string {
	if path == "" {
		return document
	}
	return path
}
