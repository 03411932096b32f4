"""The shop's one table."""

from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True
    dependencies = []  # noqa: RUF012 - Django's migration format
    operations = [  # noqa: RUF012
        migrations.CreateModel(
            name="Order",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("total_cents", models.IntegerField()),
                ("paid", models.BooleanField(default=False)),
            ],
        )
    ]
