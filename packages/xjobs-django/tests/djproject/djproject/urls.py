from django.urls import path
from shop import views

urlpatterns = [
    path("orders/", views.place_order),
    path("orders/rejected/", views.place_rejected_order),
    path("results/<str:result_id>/", views.result),
]
