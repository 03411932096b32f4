"""xjobs-web: the dashboard (an ASGI app over `app.operator`) and the MCP server over the same surface."""

from xjobs_web.asgi import dashboard
from xjobs_web.auth import basic_auth
from xjobs_web.options import AuthHook, DashboardOptions, TenantHook

__all__ = ["AuthHook", "DashboardOptions", "TenantHook", "basic_auth", "dashboard"]
