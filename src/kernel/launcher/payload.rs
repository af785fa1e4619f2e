//! The connection payload a kernel launcher sends to Enterprise Gateway's
//! response address (EG's launcher protocol, version 1): the connection
//! JSON sealed with a fresh AES-128 key (ECB, PKCS#7 padding), that key
//! sealed with the gateway's RSA public key (PKCS#1 v1.5), both in a
//! base64 JSON envelope, itself base64-encoded.

use aws_lc_rs::cipher::{PaddedBlockEncryptingKey, UnboundCipherKey, AES_128};
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use rsa::pkcs8::DecodePublicKey;
use rsa::{Pkcs1v15Encrypt, RsaPublicKey};

use super::LauncherError;

/// The launcher protocol version this payload follows.
const LAUNCHER_VERSION: u32 = 1;

/// Seals `connection` (the connection JSON) for the gateway whose public
/// key is `public_key`: the base64 DER body of its PEM, as EG substitutes
/// it for `{public_key}`.
pub fn seal(connection: &[u8], public_key: &str) -> Result<String, LauncherError> {
    let der = BASE64
        .decode(public_key.trim())
        .map_err(|e| LauncherError::PublicKey(format!("not base64: {e}")))?;
    let gateway_key = RsaPublicKey::from_public_key_der(&der)
        .map_err(|e| LauncherError::PublicKey(format!("not an RSA public key: {e}")))?;

    let mut aes_key = [0u8; 16];
    aws_lc_rs::rand::fill(&mut aes_key).map_err(|_| LauncherError::Crypto("random key"))?;
    let cipher = UnboundCipherKey::new(&AES_128, &aes_key)
        .and_then(PaddedBlockEncryptingKey::ecb_pkcs7)
        .map_err(|_| LauncherError::Crypto("AES key"))?;
    let mut sealed = connection.to_vec();
    cipher
        .encrypt(&mut sealed)
        .map_err(|_| LauncherError::Crypto("AES encryption"))?;
    let sealed_key = gateway_key
        .encrypt(&mut rsa::rand_core::OsRng, Pkcs1v15Encrypt, &aes_key)
        .map_err(|e| LauncherError::PublicKey(format!("cannot seal the AES key: {e}")))?;

    let envelope = serde_json::json!({
        "version": LAUNCHER_VERSION,
        "key": BASE64.encode(sealed_key),
        "conn_info": BASE64.encode(sealed),
    });
    Ok(BASE64.encode(envelope.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lc_rs::cipher::{PaddedBlockDecryptingKey, UnboundCipherKey};
    use rsa::pkcs8::EncodePublicKey;
    use rsa::RsaPrivateKey;

    /// What EG's `ResponseManager._decode_payload` does with a version-1
    /// payload, step by step.
    fn open(payload: &str, private: &RsaPrivateKey) -> Vec<u8> {
        let envelope: serde_json::Value =
            serde_json::from_slice(&BASE64.decode(payload).unwrap()).unwrap();
        assert_eq!(envelope["version"], 1);
        let sealed_key = BASE64.decode(envelope["key"].as_str().unwrap()).unwrap();
        let aes_key = private.decrypt(Pkcs1v15Encrypt, &sealed_key).unwrap();
        assert_eq!(aes_key.len(), 16);
        let key = UnboundCipherKey::new(&AES_128, &aes_key).unwrap();
        let cipher = PaddedBlockDecryptingKey::ecb_pkcs7(key).unwrap();
        let mut sealed = BASE64
            .decode(envelope["conn_info"].as_str().unwrap())
            .unwrap();
        cipher
            .decrypt(&mut sealed, aws_lc_rs::cipher::DecryptionContext::None)
            .unwrap()
            .to_vec()
    }

    #[test]
    fn the_gateway_opens_what_is_sealed_for_its_1024_bit_key() {
        // EG's ResponseManager uses 1024-bit keys.
        let private = RsaPrivateKey::new(&mut rsa::rand_core::OsRng, 1024).unwrap();
        let der = private.to_public_key().to_public_key_der().unwrap();
        let public = BASE64.encode(der.as_bytes());
        for connection in [
            &b"{}"[..],
            br#"{"shell_port": 52001, "key": "k", "kernel_id": "a-b"}"#,
            &[b'x'; 16][..],
        ] {
            let payload = seal(connection, &public).unwrap();
            assert_eq!(open(&payload, &private), connection);
        }
    }

    #[test]
    fn a_bad_public_key_is_named() {
        for key in ["not base64!", "aGVsbG8="] {
            let e = seal(b"{}", key).unwrap_err().to_string();
            assert!(e.contains("public key"), "{e}");
        }
    }
}
