"""xjobs-web: the dashboard (an ASGI app over `app.operator`) and the MCP server over the same surface."""

from xjobs_web.asgi import dashboard
from xjobs_web.auth import basic_auth, basic_auth_users, basic_user
from xjobs_web.mount import MOUNT_PATH, mount_path
from xjobs_web.options import ALL_TENANTS, AllTenants, AuthHook, DashboardOptions, TenantHook

__all__ = [
    "ALL_TENANTS",
    "MOUNT_PATH",
    "AllTenants",
    "AuthHook",
    "DashboardOptions",
    "TenantHook",
    "basic_auth",
    "basic_auth_users",
    "basic_user",
    "dashboard",
    "mount_path",
]
