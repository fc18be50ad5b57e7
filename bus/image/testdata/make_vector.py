#!/usr/bin/env python3
"""Makes the interop vector of TestInteropVector: python-unsigned.bin signed
with python-key.pem, written from the documented signature block layout
(ECDSA scheme, version 3) with python3-cryptography, independently of the
Go code. Run from this directory; it rewrites python-signed.bin and
python-signed.digest (and python-key.pem when missing)."""

import hashlib
import os
import zlib

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, utils

SECTOR = 4096

if not os.path.exists("python-key.pem"):
    k = ec.generate_private_key(ec.SECP256R1())
    with open("python-key.pem", "wb") as f:
        f.write(k.private_bytes(serialization.Encoding.PEM,
                                serialization.PrivateFormat.TraditionalOpenSSL,
                                serialization.NoEncryption()))
with open("python-key.pem", "rb") as f:
    key = serialization.load_pem_private_key(f.read(), password=None)

data = open("python-unsigned.bin", "rb").read()
data += b"\xff" * ((SECTOR - len(data) % SECTOR) % SECTOR)
digest = hashlib.sha256(data).digest()

nums = key.public_key().public_numbers()
le = lambda n: n.to_bytes(32, "big")[::-1]
point = bytes([2]) + le(nums.x) + le(nums.y)          # curve id 2 = P-256
r, s = utils.decode_dss_signature(key.sign(digest, ec.ECDSA(utils.Prehashed(hashes.SHA256()))))

block = bytes([0xE7, 0x03, 0x00, 0x00]) + digest + point + le(r) + le(s)
block += bytes(1196 - len(block))                     # reserved, zero
block += (zlib.crc32(block) & 0xFFFFFFFF).to_bytes(4, "little")
block += bytes(16)                                    # padding to 1216
assert len(block) == 1216
sector = block + b"\xff" * (SECTOR - len(block))

open("python-signed.bin", "wb").write(data + sector)
open("python-signed.digest", "w").write(hashlib.sha256(point).hexdigest() + "\n")
