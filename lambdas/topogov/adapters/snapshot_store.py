"""The topology snapshot in S3 (one JSON object, overwritten each pass)."""

from __future__ import annotations

import json
from typing import Any

from topogov.domain.snapshot import Snapshot
from topogov.exceptions import SnapshotError

CONTENT_TYPE = "application/json"


class S3SnapshotStore:
    def __init__(self, s3_client: Any, bucket: str, key: str = "topology/snapshot.json") -> None:
        self._s3 = s3_client
        self.bucket = bucket
        self.key = key

    def load(self) -> Snapshot | None:
        from botocore.exceptions import ClientError

        try:
            obj = self._s3.get_object(Bucket=self.bucket, Key=self.key)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code")
            if code in {"NoSuchKey", "404"}:
                return None
            raise SnapshotError(f"read s3://{self.bucket}/{self.key}: {code}") from exc
        try:
            return Snapshot.from_json(json.loads(obj["Body"].read()))
        except (ValueError, KeyError, TypeError) as exc:
            # A corrupt snapshot costs EC2 calls, never a failed pass.
            raise SnapshotError(f"corrupt snapshot s3://{self.bucket}/{self.key}: {exc}") from exc

    def save(self, snapshot: Snapshot) -> None:
        from botocore.exceptions import ClientError

        body = json.dumps(snapshot.to_json(), separators=(",", ":")).encode()
        try:
            self._s3.put_object(Bucket=self.bucket, Key=self.key, Body=body, ContentType=CONTENT_TYPE)
        except ClientError as exc:
            raise SnapshotError(f"write s3://{self.bucket}/{self.key}: {exc}") from exc

    def load_raw(self) -> dict[str, Any] | None:
        """The snapshot document as stored (for the CLI and the API)."""
        snap = self.load()
        return None if snap is None else snap.to_json()
