"""The topology snapshot in S3 (one JSON object).

Warm invocations keep the last snapshot read or written with its ETag and read again with
``IfNoneMatch``: an unchanged object costs one 304 and no parsing.
"""

from __future__ import annotations

import json
from typing import Any

from topogov.domain.errors import SnapshotError
from topogov.domain.snapshot import Snapshot

CONTENT_TYPE = "application/json"


class S3SnapshotStore:
    def __init__(self, s3_client: Any, bucket: str, key: str = "topology/snapshot.json") -> None:
        self._s3 = s3_client
        self.bucket = bucket
        self.key = key
        self._cached: tuple[str, Snapshot] | None = None  # (ETag, snapshot) as last read or written
        self.reads = 0
        self.writes = 0

    def load(self) -> Snapshot | None:
        from botocore.exceptions import ClientError

        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Key": self.key}
        if self._cached is not None:
            kwargs["IfNoneMatch"] = self._cached[0]
        self.reads += 1
        try:
            obj = self._s3.get_object(**kwargs)
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code"))
            if code in {"304", "NotModified"} and self._cached is not None:
                return self._cached[1]
            if code in {"NoSuchKey", "404"}:
                self._cached = None
                return None
            if code in {"AccessDenied", "403"}:
                # S3 answers a missing key with 403 to a caller without s3:ListBucket on the bucket
                # (GetObject, "Permissions"): say so rather than guess which it is.
                raise SnapshotError(
                    f"read s3://{self.bucket}/{self.key}: AccessDenied (the role needs s3:GetObject on "
                    f"the key, and s3:ListBucket on the bucket for S3 to say when it does not exist yet)"
                ) from exc
            raise SnapshotError(f"read s3://{self.bucket}/{self.key}: {code}") from exc
        try:
            snapshot = Snapshot.from_json(json.loads(obj["Body"].read()))
        except (ValueError, KeyError, TypeError) as exc:
            # A corrupt snapshot costs EC2 calls, never a failed pass.
            raise SnapshotError(f"corrupt snapshot s3://{self.bucket}/{self.key}: {exc}") from exc
        self._cached = (obj["ETag"], snapshot)
        return snapshot

    def save(self, snapshot: Snapshot) -> None:
        from botocore.exceptions import ClientError

        body = json.dumps(snapshot.to_json(), separators=(",", ":")).encode()
        self.writes += 1
        try:
            resp = self._s3.put_object(Bucket=self.bucket, Key=self.key, Body=body, ContentType=CONTENT_TYPE)
        except ClientError as exc:
            self._cached = None
            raise SnapshotError(f"write s3://{self.bucket}/{self.key}: {exc}") from exc
        self._cached = (resp["ETag"], snapshot)
