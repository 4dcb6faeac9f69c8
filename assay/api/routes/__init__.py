"""One router per area of the service; `assay.api.app` mounts them all."""
